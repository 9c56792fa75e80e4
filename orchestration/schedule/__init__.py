"""Schedules: cron fire times in a time zone, ticks recorded in the run store, the scheduler."""
