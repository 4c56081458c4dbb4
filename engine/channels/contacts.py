"""Whether a channel address can be reached: an SMS number that texted STOP cannot, until it texts START.

Adapters ask before they send and record what they learn (an opt-out keyword, a platform's "opted out"
error). Requests stay open either way: other channels and operators can still answer them. When an address
becomes reachable again, the prompts it missed are shown there.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from engine.channels.delivery import forget_unposted_prompts
from engine.jobs.runtime import Runtime
from engine.store.statuses import ContactStatus
from engine.store.tables import Contact, Session


def is_reachable(rt: Runtime, channel: str, address: str) -> bool:
    """True unless the address was marked unreachable (an address never seen is reachable)."""
    with rt.db.read() as db:
        status = db.execute(select(Contact.status).where(Contact.channel == channel, Contact.address == address)
                            ).scalar_one_or_none()
    return status != ContactStatus.UNREACHABLE


def set_reachable(rt: Runtime, channel: str, address: str, reachable: bool) -> None:
    """Record the address's reachability; becoming reachable re-shows the open prompts it never got."""
    status = ContactStatus.REACHABLE if reachable else ContactStatus.UNREACHABLE
    with rt.transaction() as db:
        insert = pg_insert if db.get_bind().dialect.name == "postgresql" else sqlite_insert
        db.execute(insert(Contact).values(channel=channel, address=address, status=status, updated_at=rt.now())
                   .on_conflict_do_update(index_elements=["channel", "address"],
                                          set_={"status": status, "updated_at": rt.now()}))
        if reachable:
            sessions = list(db.execute(select(Session.id).where(Session.channel == channel,
                                                                Session.address == address)).scalars())
            for session_id in forget_unposted_prompts(db, sessions):
                rt.enqueue(db, "deliver", session_id)
