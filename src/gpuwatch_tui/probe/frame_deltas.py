# gpuwatch probe: leaving out of a frame the facts the client already has (the client fills
# them back in: the frame parser's FactCache).
#
# Standard library only, Python 3.6+. Shipped inside the probe bundle as the module "frame_deltas".
from operator import itemgetter

from wire import CHILD_FACTS, GPU_FACTS, ROOT_FACTS, TAIL_EVENTS, TAIL_FACTS


# Every fact is sent in full this often anyway (a client that dropped a frame recovers), all in one frame: a
# frame that resends is a full sample (LeanPath.sample), one per period, not one per entry first seen at
# its own time.
FACT_RESEND_S = 30.0


class FrameDeltas(object):
    """Leaves out of a sample frame the facts the client already has.

    Most of a frame repeats the last one (a process's cmdline, start and owner, a GPU's name and
    total memory, a log's path, size and mtime while it does not grow). The client keeps the last
    value of each fact per process (pid, start), GPU (index) and tail (key) and fills missing ones
    in. Both sides keep exactly the entries of the latest frame, so one that leaves and comes back
    is sent in full again.
    """

    # One C call reads all of an entry's facts; equal to the last entry's, they all go (no per-fact work).
    GETTERS = dict((names, itemgetter(*names)) for names in (ROOT_FACTS, CHILD_FACTS, GPU_FACTS, TAIL_FACTS))

    def __init__(self):
        # (pid, start_ticks) -> [{fact: value last sent}, the last entry's facts (a tuple, or None where it
        # lacked some)]
        self.roots = {}
        self.children = {}
        self.gpus = {}
        self.tails = {}
        self.resent_at = None  # the last frame that sent every fact in full (FACT_RESEND_S)
        self.resend = True  # this frame does

    @classmethod
    def _strip(cls, entry, key, names, sent, kept, resend):
        try:
            facts = cls.GETTERS[names](entry)
        except KeyError:
            facts = None
        last = sent.get(key)
        if last is None or (resend and key not in kept):
            sent[key] = [dict((name, entry[name]) for name in names if name in entry), facts]
        elif facts is not None and facts == last[1]:
            for name in names:  # the client has every one of them
                del entry[name]
        else:
            values = last[0]
            for name in names:
                if name in entry:
                    value = entry[name]
                    if name in values and values[name] == value:
                        del entry[name]
                    else:
                        values[name] = value
            last[1] = facts
        kept[key] = True

    @staticmethod
    def _keep(sent, kept):
        return sent if len(kept) == len(sent) else dict((k, v) for k, v in sent.items() if k in kept)

    # The sampler builds a process's entry around these (proc_info): it asks first whether the client
    # has the facts, and leaves them out unbuilt when it has, rather than building them to delete them.
    def begin(self, now):
        """A frame starts: the processes of this frame are stripped as proc_info builds them."""
        self.resend = self.resent_at is None or now - self.resent_at >= FACT_RESEND_S
        self.kept_roots, self.kept_children, self.kept_gpus, self.kept_tails = {}, {}, {}, {}
        self.known_gpus = set()  # indices of GPUs built without their facts (known_gpu)
        self.known_tails = set()  # keys of tails whose chunk was built without its facts (known_tail)

    def known_root(self, key, facts):
        """Does the client have these ROOT_FACTS values (a tuple in that order) of process `key`?"""
        return self._known(self.roots, self.kept_roots, key, facts)

    def known_child(self, key, facts):
        return self._known(self.children, self.kept_children, key, facts)

    def known_gpu(self, index, facts):
        """Does the client have these GPU_FACTS values of GPU `index`? (The source then leaves them out.)"""
        if self._known(self.gpus, self.kept_gpus, index, facts):
            self.known_gpus.add(index)
            return True
        return False

    def known_tail(self, key, facts):
        """Does the client have these TAIL_FACTS values of tail `key`? (Tail.poll then builds the bare chunk.)"""
        if self._known(self.tails, self.kept_tails, key, facts):
            self.known_tails.add(key)
            return True
        return False

    def _known(self, sent, kept, key, facts):
        last = sent.get(key)
        if last is None or last[1] != facts or (self.resend and key not in kept):
            return False
        kept[key] = True
        return True

    def strip_root(self, entry, key):
        """A process entry with its facts (not known to the client): left with what it lacks."""
        self._strip(entry, key, ROOT_FACTS, self.roots, self.kept_roots, self.resend)

    def strip_child(self, entry, key):
        self._strip(entry, key, CHILD_FACTS, self.children, self.kept_children, self.resend)

    def apply(self, frame, now, procs_done=False):
        """Strip a whole frame. `procs_done`: its processes were stripped as they were built
        (begin, then proc_info); its GPUs and tails are stripped here."""
        if not procs_done:
            self.begin(now)
            for proc in frame["procs"]:
                self.strip_root(proc, (proc["pid"], proc["start_ticks"]))
                if not proc.get("compilers_seen", True):
                    del proc["compilers_seen"]
                for child in proc["children"]:
                    self.strip_child(child, (child["pid"], child["start_ticks"]))
        gpus, tails = self.kept_gpus, self.kept_tails
        strip = self._strip
        known_gpus, known_tails = self.known_gpus, self.known_tails
        resend = self.resend
        for gpu in frame["gpus"]:
            if gpu["index"] not in known_gpus:  # (those left out when built are kept already)
                strip(gpu, gpu["index"], GPU_FACTS, self.gpus, gpus, resend)
        for tail in frame["tails"]:
            if tail["key"] in known_tails:
                continue  # built bare (kept already)
            for name, empty in TAIL_EVENTS:
                if name in tail and tail[name] == empty:
                    del tail[name]
            strip(tail, tail["key"], TAIL_FACTS, self.tails, tails, resend)
        if resend:
            self.resent_at = now
        self.roots = self._keep(self.roots, self.kept_roots)
        self.children = self._keep(self.children, self.kept_children)
        self.gpus = self._keep(self.gpus, gpus)
        self.tails = self._keep(self.tails, tails)
