// A card per InputRequest: its controls while it is open, its outcome and who answered once it settled.

import { api } from "./api.js";
import { h, jsonBlock, principalName, when } from "./dom.js";
import { editControls } from "./edit.js";

const KIND_LABELS = { "tool-approval": "Approval", question: "Question", "session-limit": "Session limit" };

function answerText(request) {
  const response = request.response || {};
  const option = (request.options || []).find((o) => o.id === response.optionId);
  return option ? option.label : response.text || response.optionId || "";
}

export function outcomeText(request) {
  const by = request.responder ? ` by ${principalName(request.responder)}` : "";
  const note = request.response && request.response.text ? `: ${request.response.text}` : "";
  const changes = request.response && request.response.changes ? ` with changes: ${request.response.changes}` : "";
  if (request.outcome === "approved") return `approved${by}${changes}`;
  if (request.outcome === "denied") return `denied${by}${note}`;
  if (request.outcome === "answered") return `answered${by}: ${answerText(request)}`;
  return `${request.outcome || "closed"}${by}${note}`;
}

function fieldId(card, name) {
  return `${name}-${card.request.requestId}-${card.instance}`;
}

function approvalControls(card) {
  const note = h("input", { id: fieldId(card, "note"), type: "text", autocomplete: "off" });
  const buttons = card.request.options.map((option) => {
    if (option.id !== "cancel") {
      return h("button", { type: "button", class: option.style || "default", onclick: () => card.send({ optionId: option.id }) },
        option.label);
    }
    // A form, so that Enter in the note sends the Cancel with it.
    const cancel = (event) => {
      event.preventDefault();
      card.send(note.value.trim() ? { optionId: "cancel", text: note.value.trim() } : { optionId: "cancel" });
    };
    return h("form", { class: "cancel-group", onsubmit: cancel },
      h("label", { for: note.id }, "Note (optional)"), note,
      h("button", { type: "submit", class: option.style || "danger" }, option.label));
  });
  if (!card.request.editable || !card.request.action) return buttons;
  // An editable approval: Edit beside Approve, and the form it opens below the controls.
  const [toggle, form] = editControls(card);
  return [buttons[0], toggle, ...buttons.slice(1), form];
}

function questionControls(card) {
  const request = card.request;
  const parts = [];
  let select = null;
  let text = null;
  if (request.options.length) {
    select = h("select", { id: fieldId(card, "choice") }, h("option", { value: "" }, "Choose…"),
      request.options.map((o) => h("option", { value: o.id }, o.description ? `${o.label}: ${o.description}` : o.label)));
    parts.push(h("label", { for: select.id }, "Choose"), select);
  }
  if (request.allowFreeform) {
    text = h("input", { id: fieldId(card, "text"), type: "text", autocomplete: "off" });
    parts.push(h("label", { for: text.id }, select ? "or type an answer" : "Answer"), text);
  }
  const submit = (event) => {
    event.preventDefault();
    const typed = text ? text.value.trim() : "";
    if (typed) card.send({ text: typed });
    else if (select && select.value) card.send({ optionId: select.value });
    else card.say("Choose an option or type an answer first.", "error");
  };
  return [h("form", { class: "answer", onsubmit: submit }, parts, h("button", { type: "submit", class: "primary" }, "Send"))];
}

function buttonControls(card) {
  return card.request.options.map((option) =>
    h("button", { type: "button", class: option.style || "default", onclick: () => card.send({ optionId: option.id }) },
      option.label));
}

function controlsFor(card) {
  const request = card.request;
  if (request.kind === "tool-approval") return approvalControls(card);
  if (request.display === "select" || request.allowFreeform) return questionControls(card);
  return buttonControls(card);
}

let instances = 0;

export class RequestCard {
  constructor(request, { sessionLink = false } = {}) {
    this.request = { ...request };
    this.instance = ++instances;
    this.controls = h("div", { class: "controls" });
    this.outcome = h("p", { class: "outcome", tabIndex: -1 }); // focus goes there when the answered controls go
    this.notice = h("p", { class: "card-notice", role: "status" });
    this.el = h("article", { class: `card kind-${request.kind}` }, this.header(sessionLink), this.action(),
      this.controls, this.outcome, this.notice);
    this.render();
  }

  header(sessionLink) {
    const r = this.request;
    const meta = h("p", { class: "meta" }, `asked by ${principalName(r.requestedBy)} · `, when(r.createdAt),
      r.expiresAt ? [" · expires ", when(r.expiresAt)] : null,
      sessionLink ? [" · ", h("a", { href: `#/sessions/${r.sessionId}` }, "open session")] : null);
    return h("header", {}, h("span", { class: "kind" }, KIND_LABELS[r.kind] || r.kind), h("h4", {}, r.prompt), meta);
  }

  action() {
    const action = this.request.action;
    if (!action) return null;
    return h("div", { class: "action" }, h("p", {}, "Tool ", h("code", {}, action.toolName), " with"), jsonBlock(action.input));
  }

  get open() {
    return this.request.status === "pending";
  }

  update(changes) {
    Object.assign(this.request, changes);
    this.render();
  }

  render() {
    this.el.classList.toggle("settled", !this.open);
    this.el.dataset.outcome = this.request.outcome || "pending";
    if (this.open && !this.controls.hasChildNodes()) this.controls.append(...controlsFor(this));
    if (!this.open) {
      const focused = this.sending || this.controls.contains(document.activeElement);
      this.controls.replaceChildren();
      this.outcome.textContent = outcomeText(this.request);
      this.say("");
      if (focused) this.outcome.focus();
    }
  }

  say(text, tone = "") {
    this.notice.textContent = text;
    this.notice.className = `card-notice ${tone}`;
  }

  // A response policy refused someone, or could not judge them (here or elsewhere): the request stays open.
  refused(candidate) {
    if (this.open) this.say(`refused for ${principalName(candidate.responder)}: ${candidate.reason || "not allowed"}`, "error");
  }

  busy(flag) {
    for (const control of this.controls.querySelectorAll("button, input, select, textarea")) control.disabled = flag;
  }

  async send(body) {
    // Disabling the focused control moves focus to the page: remember it was here, for render(), or to give it
    // back when the card stays open (refused, failed).
    const had = this.controls.contains(document.activeElement) ? document.activeElement : null;
    this.sending = had !== null;
    this.busy(true);
    this.say("Sending…");
    try {
      const { status, data } = await api("PATCH", `/api/requests/${encodeURIComponent(this.request.requestId)}`, body);
      if (status === 202) this.say("Recorded; the response policy waits for more answers.");
      else this.update(data);
    } catch (error) {
      await this.failed(error);
    } finally {
      this.sending = false;
      this.busy(false);
      if (had?.isConnected) had.focus();
    }
  }

  async failed(error) {
    if (error.status === 422 && this.onInvalid) this.onInvalid(error.details);
    if (error.status !== 409) {
      this.say(error.status === 403 ? `refused: ${error.message}` : error.message, "error");
      return;
    }
    await this.reload();
    if (this.open) this.say("This request is no longer open.", "error");
  }

  async reload() {
    try {
      const { data } = await api("GET", `/api/requests/${encodeURIComponent(this.request.requestId)}`);
      this.update(data);
    } catch (error) {
      this.say(error.message, "error");
    }
  }
}
