// threadbot inspector: an operator's action is sent once per press.
// A "fork here" or Stop form (templates/_actions.html) disables its button as it is
// submitted, so a double click posts it once: one fork, not two. The forms are found by
// their class when submitted (event delegation), so the items a live update puts in
// place are covered too. A page shown again from the browser's back-forward cache gets
// its buttons back: a second fork is a second, deliberate press. No inline script: the
// pages' Content-Security-Policy may allow only the inspector's own files.
(function () {
  "use strict";
  var ACTIONS = "form.fork, form.stop";

  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!(form instanceof HTMLFormElement) || !form.matches(ACTIONS)) {
      return;
    }
    if (form.dataset.sent === "yes") {
      event.preventDefault(); // pressed again before the answer came
      return;
    }
    form.dataset.sent = "yes";
    var buttons = form.querySelectorAll("button");
    for (var i = 0; i < buttons.length; i++) {
      buttons[i].disabled = true; // the form is submitted all the same
    }
  });

  window.addEventListener("pageshow", function (event) {
    if (!event.persisted) {
      return;
    }
    var forms = document.querySelectorAll(ACTIONS);
    for (var i = 0; i < forms.length; i++) {
      delete forms[i].dataset.sent;
      var buttons = forms[i].querySelectorAll("button");
      for (var j = 0; j < buttons.length; j++) {
        buttons[j].disabled = false;
      }
    }
  });
})();
