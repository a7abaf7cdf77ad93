"""Schedules: cron dialects and systemd calendar events, their ticks, explain and crontabs (DESIGN §4).

One module per concern:

* :mod:`~monitor.domain.cron.schedules` — the interface: :func:`parse_cron`,
  :class:`CronSchedule` (ticks, the DST rule applied), :func:`ensure_fires_after`; the other
  public names of the engine are re-exported there.
* :mod:`~monitor.domain.cron.parse` — the ``unix``/``seconds``/``quartz`` fields and their errors.
* :mod:`~monitor.domain.cron.days` — the day table (matching days per month shape).
* :mod:`~monitor.domain.cron.iteration` — wall-clock candidates from croniter, and where its
  answers are corrected; the only module that imports croniter.
* :mod:`~monitor.domain.cron.zones` — IANA zones, UTC-offset segments and the DST rule.
* :mod:`~monitor.domain.cron.instants` — epoch seconds, the supported range, UTC text.
* :mod:`~monitor.domain.cron.calendar_events` — the ``oncalendar`` dialect (systemd.time(7)).
* :mod:`~monitor.domain.cron.explain` and :mod:`~monitor.domain.cron.calendar_explain` (their
  shared English in :mod:`~monitor.domain.cron.wording`) — the
  explain payload of ``GET /api/v3/cron/explain`` and ``monitor cron explain``.
* :mod:`~monitor.domain.cron.crontab` — reading a crontab for ``monitor import-crontab``.
"""
