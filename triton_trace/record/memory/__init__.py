"""The address space of a traced launch: space (a padded host buffer per storage, served to the interpreter),
attribution (which tensor argument a lane touches), provenance (which argument a pointer came from),
livestorages (memory reached through pointer tables), poison (``torch.empty`` made visibly uninitialised),
buffers (one number per live storage, so launches of one trace that share memory are known)."""
