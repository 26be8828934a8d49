"""A key that moves the jobs table's cursor is painted at once, with no other event to wake the
screen (a recording never changes by itself). The table once kept its running actions in
`_running`, Textual's own "message loop running" flag: an empty dict there made every refresh
wait for the next data update (up to a second on a live fleet, forever on a still one)."""

from __future__ import annotations

import asyncio
import time

from textual import events

from gpuwatch_tui.ui.widgets.jobs_table import JobsTable


async def test_cursor_moves_are_painted_without_a_data_update(app):
    async with app.run_test(size=(140, 50)) as pilot:
        await pilot.pause()
        table = app.screen.query_one(JobsTable)
        painted = []
        display = app._display

        def counting_display(screen, update):
            display(screen, update)
            if update is not None:
                painted.append(table.cursor)

        app._display = counting_display
        for key, row in (("down", 1), ("down", 2), ("up", 1), ("down", 2), ("up", 1), ("up", 0)):
            painted.clear()
            app._driver.send_message(events.Key(key, None))  # as the terminal driver hands it over
            start = time.monotonic()
            while row not in painted:  # a 1 ms poll, as a frame clock does: no pilot help
                assert time.monotonic() - start < 2.0, f"{key}: cursor {table.cursor}, no frame painted it"
                await asyncio.sleep(0.001)
