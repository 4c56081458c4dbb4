// The console: hash routes (#/, #/inbox, #/sessions/<id>), the API key box and who it acts as, the
// pending-requests badge. It shows what the API shows this key: its own sessions and requests, or all (an operator).

import { api, apiKey, openInbox } from "./api.js";
import { InboxView, SessionsView } from "./lists.js";
import { SessionView } from "./session.js";

const REFRESH_MS = 3000;
const RECONNECT_MS = 3000;
const main = document.getElementById("main");
const notice = document.getElementById("notice");
const keyPanel = document.getElementById("key-panel");
const keyInput = document.getElementById("api-key");
const badge = document.getElementById("inbox-count");
const actingAs = document.getElementById("acting-as");
let view = null;
let inbox = null;
let inboxRetry = null;

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

// "Acting as alice (user)": whose sessions and requests this page shows, from GET /api/me.
async function showWhoAmI() {
  try {
    const { data } = await api("GET", "/api/me");
    actingAs.textContent = `Acting as ${data.principal.principalId} (${data.role})`;
    actingAs.hidden = false;
  } catch {
    actingAs.hidden = true;
  }
}

// The badge follows the inbox stream: it changes as soon as a request opens or closes, wherever it was answered,
// and the view refreshes then too.
function followInbox() {
  inbox?.close();
  clearTimeout(inboxRetry);
  inbox = openInbox();
  inbox.addEventListener("inbox", (message) => {
    const { requestIds, next } = JSON.parse(message.data);
    badge.textContent = `${requestIds.length}${next ? "+" : ""}`; // a page of the oldest: more may wait
    badge.hidden = requestIds.length === 0;
    view?.refresh?.();
  });
  inbox.onerror = () => {
    if (inbox.readyState !== EventSource.CLOSED) return; // the browser reconnects by itself
    badge.hidden = true; // refused (a key is needed) or unreachable: try again in a while
    inboxRetry = setTimeout(followInbox, RECONNECT_MS);
  };
}

document.getElementById("key-form").addEventListener("submit", (event) => {
  event.preventDefault();
  apiKey.set(keyInput.value.trim());
  keyPanel.open = false;
  route();
  showWhoAmI();
  followInbox();
});
document.getElementById("key-forget").addEventListener("click", () => {
  apiKey.set("");
  keyInput.value = "";
  route();
  showWhoAmI();
  followInbox();
});
window.addEventListener("hitl:unauthorized", (event) => {
  keyPanel.open = true;
  notify(event.detail);
});
window.addEventListener("hashchange", route);

keyInput.value = apiKey.get();
route();
showWhoAmI();
followInbox();
setInterval(() => view?.refresh?.(), REFRESH_MS); // new sessions, and a page that could not load at first
