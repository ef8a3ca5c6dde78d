#!/usr/bin/env bash
# The two libraries whose own test suites benchmarks/fidelity/library_launches.py runs launch by launch, at the
# commits their CPU runs used (benchmarks/suites/RESULTS_flaggems.txt, RESULTS_fla.txt), exported from their
# git mirrors (the `fetch` tool's bare git dirs) into DEST/flaggems and DEST/fla, and the one pure-Python
# wheel the GPU machine lacks (SQLAlchemy, which flag_gems imports; PyYAML, packaging, einops and
# transformers are there) into WHEELS:
#   bash benchmarks/fidelity/fetch_libraries.sh [DEST=.lib] [WHEELS=.whl-lib]
# Only what the tests import travels: flag_gems' sources without the other vendors' backends (it loads
# only the detected vendor's; a vendor it cannot import is skipped) and its tests folder; fla's package and
# tests. About 23 MB in all (the run tool carries at most 64 MiB).
set -euo pipefail
DEST=${1:-.lib}
WHEELS=${2:-.whl-lib}
FLAGGEMS_GIT=${FLAGGEMS_GIT:-/work/.mirror/flagos-ai+FlagGems/repo}       # FlagOpen/FlagGems moved there
FLA_GIT=${FLA_GIT:-/work/.mirror/fla-org+flash-linear-attention/repo}
FLAGGEMS_COMMIT=ed2508bcb5a03000e9774734201d840ba362cd11
FLA_COMMIT=bc3b101dcb713ddc5bd8924b66754eb68b5ccf89

export_tree() {     # git dir, commit, destination, paths...
  local git=$1 commit=$2 into=$3
  shift 3
  git --git-dir="$git" cat-file -e "$commit^{commit}" 2>/dev/null ||
    { echo "fetch_libraries.sh: $git has no commit $commit (fetch the repository first)" >&2; exit 1; }
  rm -rf "$into" && mkdir -p "$into"
  git --git-dir="$git" archive "$commit" "$@" | tar -x -C "$into"
  echo "$commit" > "$into/COMMIT"
}

export_tree "$FLAGGEMS_GIT" "$FLAGGEMS_COMMIT" "$DEST/flaggems" src/flag_gems tests pyproject.toml
for vendor in "$DEST"/flaggems/src/flag_gems/runtime/backend/_*/; do
  case $(basename "$vendor") in _nvidia) ;; *) rm -rf "$vendor" ;; esac
done
rm -rf "$DEST"/flaggems/tests/test_DSA "$DEST"/flaggems/tests/test_FLA        # not run; large
export_tree "$FLA_GIT" "$FLA_COMMIT" "$DEST/fla" fla tests pyproject.toml

mkdir -p "$WHEELS"
[ -n "$(ls "$WHEELS"/sqlalchemy-2.0.48-*.whl 2>/dev/null)" ] ||
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation py --abi none \
    --platform any -d "$WHEELS" "sqlalchemy==2.0.48"          # the version flag_gems pins; pure Python
du -sh "$DEST"/flaggems "$DEST"/fla "$WHEELS"
