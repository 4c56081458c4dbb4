// The conversation, folded from the session's events: messages, tool calls with input and result, request cards.

import { RequestCard } from "./cards.js";
import { h, jsonBlock, principalName, when } from "./dom.js";

function bubble(role, text, principal, at) {
  const who = role === "user" ? principalName(principal) : "assistant";
  return h("div", { class: `message ${role}` }, h("p", { class: "meta" }, `${who} · `, when(at)), h("p", { class: "text" }, text));
}

function resultLine(result) {
  if (result.error) return `${result.status}: ${result.error.message || result.error.code}`;
  return result.status;
}

class ToolCallView {
  constructor(toolName, input) {
    this.status = h("span", { class: "status" }, "running");
    this.body = h("div", { class: "tool-body" }, h("p", { class: "label" }, "Input"), jsonBlock(input));
    this.el = h("details", { class: "tool" }, h("summary", {}, "Tool ", h("code", {}, toolName), " · ", this.status), this.body);
  }

  finish(result) {
    this.status.textContent = resultLine(result);
    this.el.dataset.status = result.status;
    this.body.append(h("p", { class: "label" }, "Result"), jsonBlock(result.error ? { error: result.error } : result.output));
  }
}

function placeName(place) {
  if (place.person) return place.person;
  if (place.group) return `the group ${place.group}`;
  return `${place.channel} ${JSON.stringify(place.address)}`;
}

// A response the policy refused or could not judge (it raised, it was cut off): the request stays open.
const UNSETTLED = new Set(["rejected", "failed", "timed-out"]);

const HANDLERS = {
  "message.received": (t, e) => t.add(bubble("user", e.data.text, e.data.principal, e.at)),
  "assistant.message": (t, e) => t.add(bubble("assistant", e.data.text, null, e.at)),
  "action.called": (t, e) => t.call(e.data.callId, e.data.toolName, e.data.input),
  "action.result": (t, e) => t.result(e.data),
  // (a request escalated here from another session opened here when it escalated; `notShown`: the show_to places
  // it could not be shown at)
  "input.requested": (t, e) => {
    e.data.requests.forEach((request) => t.request(e.data.escalatedFrom ? { ...request, escalatedAt: e.at } : request));
    (e.data.notShown || []).forEach((left) =>
      t.add(h("p", { class: "note error" }, `Not shown to ${placeName(left.place)}: ${left.reason}`)));
  },
  "input.resolved": (t, e) => e.data.resolutions.forEach((r) => t.resolve(r)),
  "input.reminded": (t, e) => t.cards.get(e.data.requestId)?.update({ reminded: e.data.count }),
  "input.escalated": (t, e) => t.cards.get(e.data.requestId)?.update({ escalatedAt: e.at }),
  "approval.candidate": (t, e) => {
    const card = t.cards.get(e.data.requestId);
    if (UNSETTLED.has(e.data.outcome)) card?.refused(e.data);
    else if (e.data.approvals) card?.update({ approvals: e.data.approvals });  // an approve short of a quorum
  },
  "turn.failed": (t, e) => t.add(h("p", { class: "note error" }, `The turn failed: ${e.data.error?.message || "see the history"}`)),
  "turn.cancelled": (t) => t.add(h("p", { class: "note" }, "The turn was cancelled.")),
};

export class Timeline {
  constructor() {
    this.el = h("ol", { class: "timeline", "aria-live": "polite" });
    this.cards = new Map();
    this.calls = new Map();
    this.actions = new Map();
  }

  apply(event) {
    const handler = HANDLERS[event.type];
    if (handler) handler(this, event);
  }

  add(node) {
    this.el.append(h("li", {}, node));
  }

  call(callId, toolName, input) {
    const view = new ToolCallView(toolName, input);
    this.calls.set(callId, view);
    this.add(view.el);
    return view;
  }

  // A call that never ran (denied, cancelled) has a result but no `action.called`: its request named it.
  result(data) {
    const action = this.actions.get(data.callId) || { toolName: "tool", input: {} };
    const view = this.calls.get(data.callId) || this.call(data.callId, action.toolName, action.input);
    view.finish(data);
  }

  request(request) {
    const card = new RequestCard(request);
    this.cards.set(request.requestId, card);
    if (request.action) this.actions.set(request.action.callId, request.action);
    this.add(card.el);
  }

  resolve(resolution) {
    const { outcome, response, responder } = resolution;
    this.cards.get(resolution.requestId)?.update({ status: "resolved", outcome, response, responder });
  }
}
