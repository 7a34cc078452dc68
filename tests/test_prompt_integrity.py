"""the tamper check re-hashes the night's days and a weekly rotation of the rest, not the whole log."""

from datetime import date, timedelta

from citegate_assets.lib.provenance.prompt_integrity import ROTATION_DAYS, days_to_verify

STORED = [date(2026, 9, 1) + timedelta(days=i) for i in range(90)]


def test_the_run_days_are_always_verified_and_few_others():
    run = [date(2026, 11, 28), date(2026, 11, 29)]
    days = days_to_verify(STORED + run, run, tonight=date(2026, 11, 30))
    assert set(run) <= set(days)
    assert len(days) <= len(run) + len(STORED) // ROTATION_DAYS + 1


def test_every_stored_day_is_verified_within_a_rotation_of_nights():
    for first_night in (date(2026, 12, 1), date(2027, 2, 14)):
        seen: set[date] = set()
        for n in range(ROTATION_DAYS):
            tonight = first_night + timedelta(days=n)
            seen |= set(days_to_verify(STORED, [tonight - timedelta(days=1)], tonight))
        assert seen >= set(STORED)


def test_a_run_without_days_verifies_everything():
    assert days_to_verify(STORED, [], tonight=date(2026, 12, 1)) == STORED
