// A card per InputRequest: its controls while it is open, its outcome and who answered once it settled.

import { api } from "./api.js";
import { channelName, h, jsonBlock, principalName, shortId, when } from "./dom.js";
import { editControls } from "./edit.js";

const KIND_LABELS = { "tool-approval": "Approval", question: "Question", "session-limit": "Session limit" };
const MAX_BUTTONS = 5; // a question with more options offers them in a menu

function answerText(request) {
  const response = request.response || {};
  const option = (request.options || []).find((o) => o.id === response.optionId);
  return option ? option.label : response.text || response.optionId || "";
}

// The app settles with a reason ("approved on timeout"), never as a person.
function appReason(principal) {
  return principal && principal.authenticator === "app" ? (principal.attributes || {}).reason : null;
}

export function outcomeText(request) {
  const by = request.responder ? ` by ${principalName(request.responder)}` : "";
  const note = request.response && request.response.text ? `: ${request.response.text}` : "";
  const changes = request.response && request.response.changes ? ` with changes: ${request.response.changes}` : "";
  const counted = request.response && request.response.approvals;  // a quorum: every person counted
  const approvers = counted ? ` by ${counted.by.map((approver) => approver.name).join(", ")}` : by;
  if (request.outcome === "approved") return appReason(request.responder) || `approved${approvers}${changes}`;
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
    if (option.style !== "danger") {
      return h("button", { type: "button", class: option.style || "default", onclick: () => card.send({ optionId: option.id }) },
        option.label);
    }
    // The refusal (Deny) takes a note: a form, so that Enter in the note sends the Deny with it.
    const deny = (event) => {
      event.preventDefault();
      card.send(note.value.trim() ? { optionId: option.id, text: note.value.trim() } : { optionId: option.id });
    };
    return h("form", { class: "deny-group", onsubmit: deny },
      h("label", { for: note.id }, "Note (optional)"), note,
      h("button", { type: "submit", class: "danger" }, option.label));
  });
  if (!card.request.editable || !card.request.action) return buttons;
  // An editable approval: Edit beside Approve, and the form it opens below the controls.
  const [toggle, form] = editControls(card);
  const after = card.request.options.findIndex((option) => option.id === "approve") + 1;
  return [...buttons.slice(0, after), toggle, ...buttons.slice(after), form];
}

// An option as a button that answers with it; its description shows under its label.
function choiceButton(card, option, index) {
  const description = option.description ? h("span", { class: "description", id: fieldId(card, `option-${index}`) }, option.description) : null;
  return h("button", { type: "button", class: "choice", "aria-label": option.label, "aria-describedby": description?.id,
    onclick: () => card.send({ optionId: option.id }) }, h("span", { class: "label-text" }, option.label), description);
}

// A few options as buttons (a menu beyond MAX_BUTTONS), and a text box where any answer goes.
function questionControls(card) {
  const request = card.request;
  const options = request.options;
  const parts = options.length && options.length <= MAX_BUTTONS
    ? [h("div", { class: "choices" }, options.map((option, index) => choiceButton(card, option, index)))] : [];
  const fields = [];
  let select = null;
  let text = null;
  if (options.length > MAX_BUTTONS) {
    select = h("select", { id: fieldId(card, "choice") }, h("option", { value: "" }, "Choose…"),
      options.map((o) => h("option", { value: o.id }, o.description ? `${o.label}: ${o.description}` : o.label)));
    fields.push(h("label", { for: select.id }, "Choose"), select);
  }
  if (request.allowFreeform) {
    text = h("input", { id: fieldId(card, "text"), type: "text", autocomplete: "off" });
    fields.push(h("label", { for: text.id }, options.length ? "Or type an answer" : "Answer"), text);
  }
  const submit = (event) => {
    event.preventDefault();
    const typed = text ? text.value.trim() : "";
    if (typed) card.send({ text: typed });
    else if (select && select.value) card.send({ optionId: select.value });
    else card.say(select ? "Choose an option or type an answer first." : "Type an answer first.", "error");
  };
  if (fields.length) {
    parts.push(h("form", { class: "answer", onsubmit: submit }, fields, h("button", { type: "submit", class: "primary" }, "Send")));
  }
  return parts;
}

function buttonControls(card) {
  return card.request.options.map((option) =>
    h("button", { type: "button", class: option.style || "default", onclick: () => card.send({ optionId: option.id }) },
      option.label));
}

function controlsFor(card) {
  const request = card.request;
  if (request.kind === "tool-approval") return approvalControls(card);
  if (request.kind === "question") return questionControls(card);
  return buttonControls(card);
}

let instances = 0;

// How far an approval that takes several people got: "1 of 2 approvals: Alice Ng".
function approvalsLine(approvals) {
  const names = approvals.by.map((approver) => approver.name).join(", ");
  return `${approvals.have} of ${approvals.need} approvals` + (names ? `: ${names}` : "");
}

export class RequestCard {
  constructor(request, { sessionLink = false } = {}) {
    this.request = { ...request };
    this.instance = ++instances;
    this.controls = h("div", { class: "controls" });
    this.outcome = h("p", { class: "outcome", tabIndex: -1 }); // focus goes there when the answered controls go
    this.notice = h("p", { class: "card-notice", role: "status" });
    this.followUp = h("p", { class: "meta follow-up" }); // reminded, escalated: they change while it waits
    this.el = h("article", { class: `card kind-${request.kind}` }, this.header(sessionLink), this.followUp,
      this.action(), this.controls, this.outcome, this.notice);
    this.render();
  }

  // In the inbox a card also says which session it is from: its title (a link to it), agent and channel.
  header(sessionLink) {
    const r = this.request;
    const session = sessionLink ? h("p", { class: "session-line" },
      h("a", { class: "session-title", href: `#/sessions/${r.sessionId}` }, r.title || `Session ${shortId(r.sessionId)}`),
      h("span", { class: "meta" }, `${r.agent} · ${channelName(r.channel)}`)) : null;
    const meta = h("p", { class: "meta" }, `asked by ${principalName(r.requestedBy)} · `, when(r.createdAt),
      r.expiresAt ? [" · expires ", when(r.expiresAt), r.onTimeout === "approve" ? ", then approved on timeout" : ""]
        : null);
    return h("header", {}, session, h("span", { class: "kind" }, KIND_LABELS[r.kind] || r.kind), h("h4", {}, r.prompt), meta);
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
    const r = this.request;
    this.followUp.replaceChildren(...[
      r.reminded ? `reminded ${r.reminded}×` : null,
      r.escalatedAt ? ["escalated ", when(r.escalatedAt)] : null,
      r.approvals && this.open ? approvalsLine(r.approvals) : null,
    ].filter(Boolean).flatMap((part, i) => (i ? [" · ", part] : [part])).flat());
    this.followUp.hidden = !this.followUp.hasChildNodes();
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
      if (status === 202 && data.approvals) this.update({ approvals: data.approvals });
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
