"""Setting Slack up: fail fast on half a configuration, the manifest, OAuth for many workspaces, Socket Mode."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml
from slack_bolt.adapter.socket_mode.internals import run_bolt_app
from slack_sdk.oauth.installation_store.sqlalchemy import SQLAlchemyInstallationStore
from slack_sdk.socket_mode.request import SocketModeRequest
from sqlalchemy import text

from adapters.slack import SCOPES, SlackChannel
from engine.jobs.recovery import sweep
from engine.store.queries import list_sessions
from gateway.app import create_app
from gateway.cli import main
from gateway.compose import ConfigurationError, build_runtime
from gateway.slack import socket_mode_handler
from tests.conftest import TEST_AGENT, make_stack, sqlite_settings
from tests.slack.workspace import SECRET, Workspace, fixture, slack_settings
from tests.support.agent import script
from tests.support.fake_slack import FakeSlack

ROOT = Path(__file__).resolve().parents[2]
REFUND = script([("refund", {"charge_id": "ch_1", "amount": 5})])


HALF = "Slack is half configured: "
OR_OAUTH = " (or, for several workspaces, SLACK_CLIENT_ID and SLACK_CLIENT_SECRET instead of SLACK_BOT_TOKEN)"


@pytest.mark.parametrize("given,message", [
    ({"slack_bot_token": "xoxb-1"}, HALF + "SLACK_BOT_TOKEN is set but SLACK_SIGNING_SECRET is missing"),
    ({"slack_signing_secret": "s"}, HALF + "SLACK_SIGNING_SECRET is set but SLACK_BOT_TOKEN is missing" + OR_OAUTH),
    ({"slack_app_token": "xapp-1"},
     HALF + "SLACK_APP_TOKEN is set but SLACK_BOT_TOKEN and SLACK_SIGNING_SECRET are missing" + OR_OAUTH),
    ({"slack_client_id": "1.2", "slack_signing_secret": "s"},
     HALF + "SLACK_CLIENT_ID and SLACK_SIGNING_SECRET are set but SLACK_CLIENT_SECRET is missing"),
    ({"slack_client_secret": "c", "slack_signing_secret": "s"},
     HALF + "SLACK_CLIENT_SECRET and SLACK_SIGNING_SECRET are set but SLACK_CLIENT_ID is missing"),
    ({"slack_client_id": "1.2", "slack_client_secret": "c"},
     HALF + "SLACK_CLIENT_ID and SLACK_CLIENT_SECRET are set but SLACK_SIGNING_SECRET is missing"),
    ({"slack_bot_token": "xoxb-1", "slack_signing_secret": "s", "slack_client_id": "1", "slack_client_secret": "c"},
     "set SLACK_BOT_TOKEN (one workspace) or SLACK_CLIENT_ID and SLACK_CLIENT_SECRET (OAuth, several workspaces), "
     "not both"),
])
def test_half_a_slack_configuration_fails_at_create_app(tmp_path: Path, given: dict[str, str], message: str) -> None:
    """The wording every channel uses: what is set, and each variable missing."""
    with pytest.raises(ConfigurationError) as failed:
        create_app(sqlite_settings(tmp_path, **given))
    assert str(failed.value) == message


def test_a_token_slack_refuses_fails_at_create_app(tmp_path: Path, fake: FakeSlack) -> None:
    fake.fail("auth.test", status=200, error="invalid_auth")
    with pytest.raises(ConfigurationError, match="Slack refused SLACK_BOT_TOKEN"):
        create_app(sqlite_settings(tmp_path, **slack_settings(fake)))


def test_slack_out_of_reach_at_start_is_one_line_naming_slack_api_url(tmp_path: Path,
                                                                       caplog: pytest.LogCaptureFixture) -> None:
    """The network fails under auth.test (nothing listens there): the start stops with what to check, where it
    used to end in a traceback of urllib's, after slack-sdk's own log line of the failure."""
    settings = sqlite_settings(tmp_path, slack_bot_token="xoxb-1", slack_signing_secret="s",
                               slack_api_url="http://127.0.0.1:9/api/")  # port 9: nothing listens

    with pytest.raises(ConfigurationError) as failed:
        create_app(settings)

    assert str(failed.value) == ("Slack cannot be reached at SLACK_API_URL (http://127.0.0.1:9/api/): "
                                 "[Errno 111] Connection refused")
    assert [r.getMessage() for r in caplog.records if r.name.startswith("slack_sdk")] == []


def test_without_slack_settings_there_is_no_slack(tmp_path: Path) -> None:
    app = create_app(sqlite_settings(tmp_path))
    assert "slack" not in app.extensions["hitl"].channels
    assert app.test_client().post("/slack/events", data="{}").status_code == 404


def test_a_worker_builds_the_slack_channel_without_flask_or_a_web_api_call(tmp_path: Path, fake: FakeSlack) -> None:
    rt = build_runtime(sqlite_settings(tmp_path, **slack_settings(fake)))
    assert isinstance(rt.channels["slack"], SlackChannel)
    assert fake.calls == []
    rt.db.dispose()


def test_the_manifest_asks_for_exactly_what_the_gateway_uses() -> None:
    manifest = yaml.safe_load((ROOT / "adapters" / "slack" / "manifest.yml").read_text())
    assert manifest["oauth_config"]["scopes"]["bot"] == SCOPES
    assert manifest["oauth_config"]["redirect_urls"][0].endswith("/slack/oauth_redirect")
    settings = manifest["settings"]
    assert settings["event_subscriptions"]["request_url"].endswith("/slack/events")
    assert settings["interactivity"]["request_url"].endswith("/slack/interactions")
    assert settings["event_subscriptions"]["bot_events"] == [
        "app_mention", "app_uninstalled", "message.channels", "message.groups", "message.im", "message.mpim",
        "tokens_revoked"]
    # each place a mention can start a session in sends its thread's replies: a group DM's too
    assert "mpim:history" in SCOPES
    assert manifest["features"]["app_home"]["messages_tab_enabled"] is True  # people can DM the bot


def test_every_subscribed_event_is_acknowledged(slack: Workspace) -> None:
    """Bolt answers 404 to an event nobody listens to, and Slack retries it."""
    tokens_revoked = {**fixture("app_uninstalled"), "event_id": "Ev0TOKENS1",
                      "event": {"type": "tokens_revoked", "tokens": {"oauth": [], "bot": ["UBOT"]}}}
    group_reply = slack.event("message", "alice", "hi", channel_type="group", thread_ts="1600000000.000001")
    for payload in (fixture("app_uninstalled"), tokens_revoked, group_reply):
        assert slack.send_event(payload).status_code == 200


# -- many workspaces: OAuth ------------------------------------------------------------------------------


def oauth_settings(fake: FakeSlack) -> dict[str, Any]:
    return {"slack_client_id": "1234.5678", "slack_client_secret": "client-secret", "slack_signing_secret": SECRET,
            "slack_api_url": fake.url}


def install(slack: Workspace, installation: dict[str, Any] | None = None) -> dict[str, Any]:
    """A workspace admin installs the app (`installation`: what oauth.v2.access answers, by default the
    fixture's): the install page, Slack's consent screen, the redirect back."""
    installation = installation or fixture("oauth_v2_access")
    slack.fake.installation = installation
    page = slack.http.get("/slack/install")
    assert page.status_code == 200
    link = re.search(r'href="(https://slack.com/oauth/v2/authorize[^"]+)"', page.get_data(as_text=True))
    assert link is not None
    query = parse_qs(urlsplit(html.unescape(link.group(1))).query)
    assert query["client_id"] == ["1234.5678"] and query["scope"] == [",".join(SCOPES)]
    state = query["state"][0]
    done = slack.http.get(f"/slack/oauth_redirect?code=a-code&state={state}")
    assert done.status_code == 200, done.get_data(as_text=True)
    return installation


def from_installed_team(payload: dict[str, Any], team: str) -> dict[str, Any]:
    payload.update(team_id=team, authorizations=[{**payload["authorizations"][0], "team_id": team}])
    payload["event"]["team"] = team
    return payload


def mentioned_after_install(slack: Workspace, **top: Any) -> tuple[dict[str, Any], str, dict[str, Any]]:
    """The app installed, alice mentions it in the installed workspace (`top`: fields of the payload's top level
    to set); the installation, its team and the mention."""
    installation = install(slack)
    team, bot_user = installation["team"]["id"], installation["bot_user_id"]
    slack.fake.reset()
    mention = from_installed_team(slack.event("app_mention", "alice", f"<@{bot_user}> {REFUND}"), team)
    mention.update(top)
    slack.ok(slack.send_event(mention))
    return installation, team, mention


def test_an_installed_workspace_is_served_with_its_own_token(request: pytest.FixtureRequest, tmp_path: Path,
                                                            fake: FakeSlack) -> None:
    with make_stack(request, "sqlite", tmp_path, **oauth_settings(fake)) as stack:
        slack = Workspace(stack, fake)
        installation, team, mention = mentioned_after_install(slack)
        assert fake.called("auth.test") == []  # authorized from the stored installation
        [card] = [c for c in fake.called("chat.postMessage") if c.params.get("blocks")]
        assert card.token == installation["access_token"]
        [session] = list_sessions(stack.rt)["sessions"]
        assert stack.history(session["id"])["address"] == f"slack:{team}:C0TEST:{mention['event']['ts']}"

        slack.ok(slack.send_event(from_installed_team(fixture("app_uninstalled"), team)))
        store = SQLAlchemyInstallationStore(client_id="1234.5678", engine=stack.rt.db.engine)
        assert store.find_bot(enterprise_id=None, team_id=team) is None


def test_install_states_never_used_do_not_pile_up(request: pytest.FixtureRequest, tmp_path: Path,
                                                  fake: FakeSlack) -> None:
    """A state is deleted when an install uses it; one an abandoned page (or a link unfurler) took is deleted once
    it has expired, when the next install page is opened."""
    with make_stack(request, "sqlite", tmp_path, **oauth_settings(fake)) as stack:
        slack = Workspace(stack, fake)
        for _ in range(3):
            assert slack.http.get("/slack/install").status_code == 200
        with stack.rt.db.engine.begin() as conn:  # those three, left an hour ago
            conn.execute(text("UPDATE slack_oauth_states SET expire_at = :past"),
                         {"past": datetime.now(UTC).replace(tzinfo=None) - timedelta(hours=1)})
        install(slack)  # the page issues a fresh state (the old ones go), the redirect uses it
        with stack.rt.db.engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM slack_oauth_states")).scalar_one() == 0


def test_an_uninstalled_workspace_is_refused_for_good_until_it_installs_again(
        request: pytest.FixtureRequest, tmp_path: Path, fake: FakeSlack, caplog: pytest.LogCaptureFixture) -> None:
    with make_stack(request, "sqlite", tmp_path, **oauth_settings(fake)) as stack:
        slack = Workspace(stack, fake)
        first = install(slack)
        second = install(slack, {**fixture("oauth_v2_access"), "access_token": "xoxb-second",
                                 "team": {"id": "T0SECOND", "name": "Second"}})
        api = stack.client("alice")

        def ask(team: str) -> list[str | None]:
            """The tokens of what an API session in `team` got posted."""
            fake.reset()
            started = api.post("/api/sessions", json={"channel": "slack", "message": REFUND,
                                                      "address": {"channel": "C0TEST", "teamId": team}})
            assert started.status_code == 201
            slack.wait_idle()
            return [c.token for c in fake.called("chat.postMessage")]

        assert ask("T0SECOND") == ["xoxb-second", "xoxb-second"]
        revoked = {**from_installed_team(fixture("app_uninstalled"), "T0SECOND"), "event_id": "Ev0REVOKED",
                   "event": {"type": "tokens_revoked", "tokens": {"oauth": [], "bot": ["U0KRQLJ9H"]}}}
        slack.ok(slack.send_event(revoked))
        caplog.clear()
        assert ask("T0SECOND") == []
        refused = [r.getMessage() for r in caplog.records if "not_installed" in r.getMessage()]
        assert len(refused) == 2  # the message and the card, each logged once
        sweep(stack.rt)  # nothing is owed: no retry
        slack.wait_idle()
        assert fake.calls == [] and len([r for r in caplog.records if "not_installed" in r.getMessage()]) == 2
        assert ask(first["team"]["id"]) == [first["access_token"]] * 2  # the other workspace is untouched
        install(slack, second)
        assert ask("T0SECOND") == ["xoxb-second", "xoxb-second"]


def test_a_mention_in_a_channel_another_organization_shared_is_answered_with_the_installed_token(
        request: pytest.FixtureRequest, tmp_path: Path, fake: FakeSlack) -> None:
    """In a Slack Connect channel the payload's top-level team is the workspace that created the channel;
    `authorizations[0]` names the installation the event came to, whose token may post there."""
    with make_stack(request, "sqlite", tmp_path, **oauth_settings(fake)) as stack:
        slack = Workspace(stack, fake)
        installation, team, mention = mentioned_after_install(slack, team_id="T0PARTNER", is_ext_shared_channel=True)
        [card] = [c for c in fake.called("chat.postMessage") if c.params.get("blocks")]
        assert card.token == installation["access_token"]
        [session] = list_sessions(stack.rt)["sessions"]
        assert stack.history(session["id"])["address"] == f"slack:{team}:C0TEST:{mention['event']['ts']}"


def test_an_api_session_of_a_multi_workspace_gateway_names_its_team(request: pytest.FixtureRequest,
                                                                    tmp_path: Path, fake: FakeSlack) -> None:
    with make_stack(request, "sqlite", tmp_path, **oauth_settings(fake)) as stack:
        client = stack.client("alice")
        missing = client.post("/api/sessions", json={"channel": "slack", "address": {"channel": "C0TEST"}})
        assert (missing.status_code, missing.get_json()["error"]["code"]) == (422, "invalid_address")
        assert "teamId" in missing.get_json()["error"]["message"]
        given = client.post("/api/sessions", json={"channel": "slack", "address": {
            "channel": "C0TEST", "teamId": "T9TK3CUKW", "enterpriseId": "E0GRID"}})
        assert given.status_code == 201
        assert stack.history(given.get_json()["id"])["address"] == "slack:E0GRID/T9TK3CUKW:C0TEST:"


# -- Socket Mode -----------------------------------------------------------------------------------------


def test_socket_mode_runs_the_same_listeners(request: pytest.FixtureRequest, tmp_path: Path,
                                            fake: FakeSlack) -> None:
    with make_stack(request, "sqlite", tmp_path, slack_app_token="xapp-1-test", **slack_settings(fake)) as stack:
        handler = socket_mode_handler(stack.app)
        assert handler.app is stack.app.extensions["slack"].app and handler.client.app_token == "xapp-1-test"
        slack = Workspace(stack, fake)
        envelope = SocketModeRequest(type="events_api", envelope_id="1",
                                     payload=slack.event("app_mention", "alice", f"<@UBOT> {REFUND}"))
        assert run_bolt_app(handler.app, envelope).status == 200  # over the websocket: nothing to sign
        slack.wait_idle()
        assert [m.now["text"] for m in fake.messages] == ["step 1", "Approve refund?"]


def test_socket_mode_needs_an_app_token(slack: Workspace, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="SLACK_APP_TOKEN"):
        socket_mode_handler(slack.stack.app)
    for name, value in {"DATABASE_URL": f"sqlite:///{tmp_path / 'cli.db'}", "HITL_AGENT": TEST_AGENT,
                        "SLACK_BOT_TOKEN": "xoxb-cli", "SLACK_SIGNING_SECRET": SECRET,
                        "SLACK_API_URL": slack.fake.url}.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SystemExit, match="hitl: Socket Mode needs SLACK_APP_TOKEN"):
        main(["slack-socket"])
