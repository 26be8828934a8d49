# gpuwatch probe ops: write the record of an action taken on this host's processes (action_notes.py).
# Standard library only, Python 3.6+, Linux. Shipped to the host and imported as "ops_notes".
import time

from action_notes import make_record, write_record


def op_note_action(args):
    """Write the record of an action taken now (a kill, a restart): every gpuwatch watching reads it."""
    record = make_record(args, time.time())
    path = write_record(record)
    return {"path": path, "id": record["id"], "time": record["time"]}


OPS = {"note_action": op_note_action}
