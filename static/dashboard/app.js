// Every page: the confirmation dialog of destructive forms, copy buttons, and what htmx does when a request
// fails. No inline handlers (the CSP forbids them): everything is delegated from the document.
(function () {
  "use strict";

  // --- confirm before destructive actions ---------------------------------------------------------------------
  // A form with data-confirm="…" opens the page's <dialog> first; confirming resubmits it with confirmed=1
  // (the server asks again on a page of its own when that field is missing, so this works without scripts).
  const dialog = document.getElementById("confirm-dialog");

  function confirmedField(form) {
    let field = form.querySelector("input[name=confirmed]");
    if (!field) {
      field = document.createElement("input");
      field.type = "hidden";
      field.name = "confirmed";
      form.appendChild(field);
    }
    return field;
  }

  document.addEventListener("submit", (evt) => {
    const form = evt.target;
    if (!(form instanceof HTMLFormElement) || !form.dataset.confirm || !dialog) return;
    if (form.dataset.confirmedOnce === "1") {
      delete form.dataset.confirmedOnce;
      return; // confirmed: let the browser (or htmx) send it
    }
    evt.preventDefault();
    evt.stopImmediatePropagation();
    const submitter = evt.submitter || null;
    document.getElementById("confirm-title").textContent = form.dataset.confirmTitle || "Are you sure?";
    document.getElementById("confirm-message").textContent = form.dataset.confirm;
    document.getElementById("confirm-ok").textContent =
      form.dataset.confirmButton || (submitter && submitter.textContent.trim()) || "Confirm";
    dialog.returnValue = "";
    dialog.addEventListener("close", function onClose() {
      dialog.removeEventListener("close", onClose);
      if (dialog.returnValue !== "ok") return;
      const field = confirmedField(form);
      field.value = "1";
      form.dataset.confirmedOnce = "1";
      form.requestSubmit(submitter && submitter.form === form ? submitter : undefined);
      // An htmx form stays on the page: the next submission asks again.
      setTimeout(() => { field.value = ""; }, 0);
    });
    dialog.showModal();
    document.getElementById("confirm-ok").focus();
  }, true);

  // --- copy buttons -------------------------------------------------------------------------------------------
  document.addEventListener("click", async (evt) => {
    const button = evt.target.closest("button[data-copy]");
    if (!button) return;
    const source = document.querySelector(button.dataset.copy);
    if (!source) return;
    const value = source.dataset.copyValue || source.textContent.trim();
    try {
      await navigator.clipboard.writeText(value);
    } catch (error) {
      // Without the clipboard API (plain http): select the text so Ctrl+C copies it.
      const range = document.createRange();
      range.selectNodeContents(source);
      const selection = window.getSelection();
      selection.removeAllRanges();
      selection.addRange(range);
    }
    const label = button.textContent;
    button.textContent = "Copied";
    button.dataset.copied = "1";
    setTimeout(() => { button.textContent = label; delete button.dataset.copied; }, 1500);
  });

  // --- htmx: failures are said, not swallowed -----------------------------------------------------------------
  // 401 comes with HX-Redirect (htmx follows it to sign-in). Anything else that fails keeps the panel as it
  // was and shows why.
  document.addEventListener("htmx:responseError", (evt) => {
    const xhr = evt.detail.xhr;
    if (xhr.status === 401) return;
    let message = "The request failed (" + xhr.status + ").";
    try {
      const body = JSON.parse(xhr.responseText);
      if (body && body.error && body.error.message) message = body.error.message;
    } catch (error) {
      const doc = new DOMParser().parseFromString(xhr.responseText || "", "text/html");
      const said = doc.querySelector(".error-page [data-message]");
      if (said && said.textContent.trim()) message = said.textContent.trim();
    }
    const target = evt.detail.target;
    if (target) {
      const note = document.createElement("p");
      note.className = "error";
      note.setAttribute("role", "alert");
      note.textContent = message;
      target.replaceChildren(note);
    }
  });
  document.addEventListener("htmx:sendError", (evt) => {
    const target = evt.detail.target;
    if (!target) return;
    const note = document.createElement("p");
    note.className = "error";
    note.setAttribute("role", "alert");
    note.textContent = "The server could not be reached. Check the connection and try again.";
    target.replaceChildren(note);
  });
})();
