// citegate review: keyboard shortcuts (no inline script: the CSP allows only this file).
// Queue page: j/k move the selection, Enter or o opens it, n/p next/previous page.
// Entry page: j/n next entry, k/p previous, a accept, r repair (type a note, Enter), e escalate (cause, note, Enter),
// u back to the queue. Esc leaves a field. Keys typed into a field are the field's.
// Label page: y yes, p partial, n no, s skip (each submits at once), u undo the last label.
(function () {
  "use strict";
  var page = document.body.getAttribute("data-page");

  function go(id) {
    var link = document.getElementById(id);
    if (link) { window.location.assign(link.href); }
  }

  function typing(target) {
    var tag = target && target.tagName;
    return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || (target && target.isContentEditable);
  }

  var selected = -1;
  function rows() { return document.querySelectorAll("#entries tbody tr[data-href]"); }
  function select(index) {
    var all = rows();
    if (!all.length) { return; }
    index = Math.max(0, Math.min(all.length - 1, index));
    if (selected >= 0 && all[selected]) { all[selected].classList.remove("selected"); }
    selected = index;
    all[selected].classList.add("selected");
    all[selected].scrollIntoView({block: "nearest"});
  }

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey) { return; }
    var target = event.target;
    if (typing(target)) {
      if (event.key === "Escape") { target.blur(); event.preventDefault(); }
      else if (event.key === "Enter" && target.tagName === "SELECT" && target.form) {
        // a select does not submit its form on Enter by itself
        event.preventDefault();
        var note = target.form.querySelector("input[name=note]");
        if (note) { note.focus(); } else { target.form.requestSubmit(); }
      }
      return;
    }
    var key = event.key;
    if (page === "queue") {
      if (key === "j") { select(selected + 1); }
      else if (key === "k") { select(selected - 1); }
      else if (key === "Enter" || key === "o") {
        var all = rows();
        if (all.length) { window.location.assign(all[Math.max(selected, 0)].getAttribute("data-href")); }
      }
      else if (key === "n") { go("next-page"); }
      else if (key === "p") { go("previous-page"); }
      else { return; }
      event.preventDefault();
    } else if (page === "entry") {
      if (key === "j" || key === "n") { go("next-entry"); }
      else if (key === "k" || key === "p") { go("previous-entry"); }
      else if (key === "a") { document.getElementById("form-accept").requestSubmit(); }
      else if (key === "r") { document.getElementById("repair-note").focus(); }
      else if (key === "e") { document.getElementById("escalate-cause").focus(); }
      else if (key === "u") { go("queue-link"); }
      else { return; }
      event.preventDefault();
    }
  });

  var labelKeys = {y: "label-yes", p: "label-partial", n: "label-no", s: "label-skip", u: "label-undo"};
  var sent = false;  // one key press, one label: the page is leaving
  document.addEventListener("keydown", function (event) {
    if (page !== "label" || sent || event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) { return; }
    var button = document.getElementById(labelKeys[event.key] || "");
    if (!button) { return; }
    event.preventDefault();
    sent = true;
    button.form.requestSubmit(button);
  });

  if (page === "queue" && rows().length) { select(0); }
}());
