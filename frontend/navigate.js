// Keyboard and "go to" navigation: a program typed as x, y, z; keys for the next finding, the Tiles panel's
// trips and the program box (the op keys are view.js's); "?" shows the keys (listed in index.html's #key-help). The keys are listened to where the host says (the page, or one
// notebook output), never while the user types into an input or a select.

// "3", "3,1", "(3, 1, 0)" -> [3, 1, 0]; null when it is not one to three non-negative integers.
export function parseProgram(text) {
  const parts = String(text).replace(/[()[\]\s]/g, "").split(",").filter((p) => p !== "");
  if (!parts.length || parts.length > 3 || !parts.every((p) => /^\d+$/.test(p))) return null;
  const pid = parts.map(Number);
  while (pid.length < 3) pid.push(0);
  return pid;
}

// nav: {program(pid), finding(step), trip(step): the Tiles panel's next or previous trip, error(message)}
export function installNavigation($, keys, nav) {
  const help = $("key-help"), input = $("goto-pid");
  $("goto").addEventListener("submit", (e) => {
    e.preventDefault();
    const pid = parseProgram(input.value);
    if (!pid) { nav.error(`"${input.value.slice(0, 40)}" is not a program id: type x, or x, y, or x, y, z (e.g. 3, 1, 0).`); return; }
    input.blur();
    nav.program(pid);
  });
  $("key-help-close").addEventListener("click", () => { help.hidden = true; });
  keys.addEventListener("keydown", (e) => {
    if (e.target.closest && e.target.closest("input, select, textarea")) {
      if (e.key === "Escape") e.target.blur();
      return;
    }
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    if (e.key === "?") { help.hidden = !help.hidden; e.preventDefault(); }
    else if (e.key === "Escape") help.hidden = true;
    else if (e.key === "g") { input.focus(); input.select(); e.preventDefault(); }
    else if (e.key === "n" || e.key === "p") { nav.finding(e.key === "n" ? 1 : -1); e.preventDefault(); }
    else if (e.key === "[" || e.key === "]") { nav.trip(e.key === "]" ? 1 : -1); e.preventDefault(); }
  });
}
