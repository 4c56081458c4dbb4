from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.twilio.support import Sms, twilio_stack


@pytest.fixture
def sms(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Sms]:
    """The SMS channel on SQLite with in-process jobs, texting through the fake Twilio API."""
    with twilio_stack(request, "sqlite", tmp_path) as built:
        yield built
