// The console: hash routes (#/, #/inbox, #/sessions/<id>), the API key box, the pending-requests badge.

import { api, apiKey } from "./api.js";
import { InboxView, SessionsView } from "./lists.js";
import { SessionView } from "./session.js";

const REFRESH_MS = 3000;
const main = document.getElementById("main");
const notice = document.getElementById("notice");
const keyPanel = document.getElementById("key-panel");
const keyInput = document.getElementById("api-key");
const badge = document.getElementById("inbox-count");
let view = null;

function notify(text) {
  notice.textContent = text;
  notice.hidden = !text;
}

function route() {
  view?.close?.();
  notify("");
  const match = location.hash.match(/^#\/sessions\/([\w-]+)$/);
  const name = match ? "session" : location.hash === "#/inbox" ? "inbox" : "sessions";
  if (match) view = new SessionView(main, match[1]);
  else if (name === "inbox") view = new InboxView(main, notify);
  else view = new SessionsView(main, notify);
  for (const link of document.querySelectorAll("nav a")) {
    if (link.dataset.view === name) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
}

async function tick() {
  try {
    const { data } = await api("GET", "/api/requests?status=pending");
    badge.textContent = `${data.requests.length}${data.next ? "+" : ""}`; // a page of the oldest: more may wait
    badge.hidden = data.requests.length === 0;
  } catch {
    badge.hidden = true;
  }
  view?.refresh?.();
}

document.getElementById("key-form").addEventListener("submit", (event) => {
  event.preventDefault();
  apiKey.set(keyInput.value.trim());
  keyPanel.open = false;
  route();
});
document.getElementById("key-forget").addEventListener("click", () => {
  apiKey.set("");
  keyInput.value = "";
  route();
});
window.addEventListener("hitl:unauthorized", (event) => {
  keyPanel.open = true;
  notify(event.detail);
});
window.addEventListener("hashchange", route);

keyInput.value = apiKey.get();
route();
tick();
setInterval(tick, REFRESH_MS);
