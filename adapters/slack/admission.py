"""Who may use the bot on Slack: people of the allowed teams, as Twilio has its allow list and GitHub its
permission floor (docs/admission.md sets the three side by side).

`SLACK_ALLOWED_TEAMS` lists workspace (`T...`) and Enterprise Grid organization (`E...`) ids. Unset, the allowed
teams are those that installed the app: with one workspace the token's team and its organization (as auth.test
named them when the gateway started), with OAuth every installation's. A person is admitted when their team or
their organization is allowed (in some payloads Slack names a Grid member's team by the organization's id).
Anyone else, such as a Slack Connect guest of another organization, is turned away by the listeners: what they
send is stored as ignored, never a message or an answer, and they are told once per channel.
`SLACK_ALLOW_EXTERNAL_USERS=1` admits everyone who can reach the bot.
"""

from __future__ import annotations

from collections.abc import Iterable, Set

from slack_bolt import BoltContext
from slack_sdk.oauth.installation_store.sqlalchemy import SQLAlchemyInstallationStore
from sqlalchemy import or_, select

from engine.protocol import Principal

TURNED_AWAY = "another-organization"
"""Why an ignored Slack item was not acted on: its sender is of no allowed team."""


class Admission:
    def __init__(self, teams: Iterable[str], anyone: bool, installations: SQLAlchemyInstallationStore | None) -> None:
        """`teams`: SLACK_ALLOWED_TEAMS; `anyone`: SLACK_ALLOW_EXTERNAL_USERS; `installations`: the OAuth
        installation store, None with one workspace (SLACK_BOT_TOKEN)."""
        self.anyone = anyone
        self.teams = frozenset(teams)
        self.installations = installations

    def admits(self, principal: Principal, context: BoltContext) -> bool:
        """Whether the person `principal` (from a verified payload) may talk to the bot and answer requests."""
        if self.anyone:
            return True
        ids = {str(value) for key in ("teamId", "enterpriseId") if (value := principal.attributes.get(key))}
        if self.teams:
            return not self.teams.isdisjoint(ids)
        if self.installations is None:  # the token's workspace, from auth.test (Bolt ran it once, at start)
            installed = context.authorize_result
            return installed is not None and not ids.isdisjoint({installed.team_id, installed.enterprise_id})
        return installed_in(self.installations, ids)


def installed_in(store: SQLAlchemyInstallationStore, ids: Set[str]) -> bool:
    """Whether the app is installed (a bot token not revoked) in a workspace or an organization of `ids`."""
    bots = store.bots.c
    query = select(bots.id).where(bots.client_id == store.client_id, bots.bot_token.is_not(None),
                                  or_(bots.team_id.in_(ids), bots.enterprise_id.in_(ids))).limit(1)
    with store.engine.connect() as connection:
        return connection.execute(query).first() is not None
