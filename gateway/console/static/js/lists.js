// The session list with its "new session" box, and the operator inbox of pending requests.

import { api } from "./api.js";
import { RequestCard } from "./cards.js";
import { channelName, h, shortId, when } from "./dom.js";

const PAGE = 100; // the API's page: sessions listed at first, and more per "Show older sessions"

// A session by its title (its first message), then its agent, channel, status, start and id.
function sessionRow(session) {
  const open = session.pendingRequests;
  return h("li", {},
    h("p", { class: "session-line" },
      h("a", { class: "session-title", href: `#/sessions/${session.id}` }, session.title || "No message yet"),
      open ? h("span", { class: "badge" }, open === 1 ? "1 open request" : `${open} open requests`) : null),
    h("p", { class: "meta" }, `${session.agent} · ${channelName(session.channel)} · ${session.status} · started `,
      when(session.createdAt), " · ", h("code", {}, shortId(session.id))));
}

// A list the page refreshes every few seconds: the error a refresh showed goes once one works again.
class RefreshedList {
  constructor(notify) {
    this.notify = notify;
  }

  failed(error) {
    this.notify(error.message);
    this.stale = true;
  }

  recovered() {
    if (this.stale) this.notify("");
    this.stale = false;
  }
}

export class SessionsView extends RefreshedList {
  constructor(main, notify) {
    super(notify);
    this.limit = PAGE;
    this.list = h("ul", { class: "sessions" });
    this.older = h("button", { type: "button", onclick: () => { this.limit += PAGE; this.refresh(); } },
      "Show older sessions");
    this.older.hidden = true;
    main.replaceChildren(h("section", {}, h("h2", { tabIndex: -1 }, "Sessions"), this.newSession(), this.list,
      this.older));
    main.querySelector("h2").focus();
    this.refresh();
  }

  newSession() {
    const input = h("input", { id: "new-message", type: "text", autocomplete: "off", required: true,
      placeholder: "refund $20 on ch_1001" });
    const submit = async (event) => {
      event.preventDefault();
      try {
        const { data } = await api("POST", "/api/sessions", { message: input.value });
        location.hash = `#/sessions/${data.id}`;
      } catch (error) {
        this.notify(error.message);
      }
    };
    return h("form", { class: "new-session", onsubmit: submit },
      h("label", { for: input.id }, "Start a session with the agent"), input,
      h("button", { type: "submit", class: "primary" }, "Start"));
  }

  async refresh() {
    try {
      const { data } = await api("GET", `/api/sessions?limit=${this.limit}`);
      this.recovered();
      this.older.hidden = !data.next; // the newest `limit` are listed; each click lists a page more
      const shown = JSON.stringify(data.sessions);
      if (shown === this.shown) return; // unchanged: keep the list (and the keyboard focus in it) as it is
      this.shown = shown;
      const rows = data.sessions.map(sessionRow);
      this.list.replaceChildren(...(rows.length ? rows : [h("li", { class: "empty" }, "No sessions yet.")]));
    } catch (error) {
      this.failed(error);
    }
  }
}

export class InboxView extends RefreshedList {
  constructor(main, notify) {
    super(notify);
    this.cards = new Map();
    this.list = h("div", { class: "cards" });
    this.empty = h("p", { class: "empty" }, "Nothing is waiting for a person.");
    this.more = h("p", { class: "lede" });
    this.more.hidden = true;
    main.replaceChildren(h("section", {}, h("h2", { tabIndex: -1 }, "Inbox"),
      h("p", { class: "lede" }, "Every open request across sessions, oldest first."), this.empty, this.list,
      this.more));
    main.querySelector("h2").focus();
    this.refresh();
  }

  // New requests join at the end; cards answered elsewhere stay, showing their outcome, until you leave.
  // Called every few seconds, and at once when the inbox stream says a request opened or closed.
  async refresh() {
    try {
      const { data } = await api("GET", "/api/requests?status=pending");
      this.recovered();
      const pending = new Set(data.requests.map((r) => r.requestId));
      for (const request of data.requests) if (!this.cards.has(request.requestId)) this.add(request);
      for (const [id, card] of this.cards) if (card.open && !pending.has(id)) await card.reload();
      this.empty.hidden = this.cards.size > 0;
      // the API answers a page of the oldest: the rest show as these are answered
      this.more.hidden = !data.next;
      this.more.textContent = "More requests are waiting: they show here as these are answered.";
    } catch (error) {
      this.failed(error);
    }
  }

  add(request) {
    const card = new RequestCard(request, { sessionLink: true });
    this.cards.set(request.requestId, card);
    this.list.append(card.el);
  }
}
