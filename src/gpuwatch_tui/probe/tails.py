# gpuwatch probe: log tails and output directories, read by the probe so one channel carries
# everything.
#
# Standard library only, Python 3.6+. Shipped inside the probe bundle as the module "tails".
import binascii
import os
from stat import S_ISREG
import time


TAIL_CAP_BYTES = 256 * 1024  # at most this much of one log per frame; the rest waits (see Tail)
# A log that keeps growing has its path stat'ed this often: what only that stat sees is a log deleted (or
# replaced) while its writer keeps writing the old file, and the true mtime. A rotation the writer follows or a
# truncation is seen at the first poll that reads nothing, at once (Tail.poll). At 5 s, 8 growing logs cost a
# stat and a full poll 1.6 times a sample.
TAIL_CHECK_S = 15.0
DIR_ENTRY_CAP = 2000


class Tail(object):
    """Follows one file across rotation, truncation and delete-and-recreate.

    Reads forward from where it left off, so the lines written before a huge one are never lost:
    a line (or a carriage-return frame of a progress bar) longer than LINE_CAP_BYTES keeps its
    first LINE_CAP_BYTES and the rest is dropped and reported in `cut` as [position in data,
    bytes dropped]. At most TAIL_CAP_BYTES are passed on per frame (the rest waits for the next
    one); only when more than SCAN_CAP_BYTES are waiting (the writer outruns us) are the oldest
    bytes skipped, and counted in `skipped`.
    """

    LINE_CAP_BYTES = 64 * 1024
    SCAN_CAP_BYTES = 4 * 1024 * 1024  # read at most this much of one log per frame
    BLOCK_BYTES = 64 * 1024

    def __init__(self, key, path, backlog):
        self.key = key
        self.path = path
        self.backlog = backlog
        self.fd = None  # a raw descriptor: a regular file is read with one pread() at the offset
        self.regular = True
        self.ino = None
        self.offset = 0
        self.first = True
        self.line_len = 0  # bytes of the current line (frame) passed on so far
        self.dropping = 0  # bytes of the current line dropped and not yet reported
        # While the log grows, a poll is one pread() on the kept descriptor (see poll): these are the
        # path's last stat (when, and the mtime it gave) and how many polls in a row read new bytes up
        # to the end.
        self.checked_at = 0.0
        self.mtime = None
        self.grew = 0

    def _open(self):
        fd = os.open(self.path, os.O_RDONLY)
        try:
            st = os.fstat(fd)
        except OSError:
            os.close(fd)
            raise
        self.fd, self.ino, self.regular = fd, (st.st_dev, st.st_ino), S_ISREG(st.st_mode)
        return st

    def _close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def poll(self, now=None, known=None):
        """This frame's chunk. `known(key, facts)` (FrameDeltas.known_tail): whether the client has these
        TAIL_FACTS; where it has, the growing case builds the bare chunk (key, data, size), as the deltas would
        leave it (None: every field, every frame). While the log grows (the last two polls read new bytes up to
        its end), one pread() at the offset, no stat: bytes that come mean the file was neither truncated (a read
        past the end gives nothing) nor replaced (a renamed log being written still grows: its bytes are the
        writer's); the size is where the read ended and the mtime stays the last stat's (the client
        times a growing log by its new bytes, not its mtime). A read that gives nothing, or
        TAIL_CHECK_S since the last stat, goes the full way (stat the path: rotation, deletion,
        truncation, the true mtime). A log that is quiet between lines is stat'ed first, as it was
        (trying the read first would cost it one more call a line)."""
        if now is None:
            now = time.time()
        if self.grew >= 2 and self.fd is not None and now - self.checked_at < TAIL_CHECK_S:
            # The usual case inline, as _poll_growing would take it (four calls fewer a log, a sample): one short
            # block (the end of what is there) with no line reaching LINE_CAP_BYTES. Nothing read, or a read that
            # failed: the full way below, as _poll_growing has it; anything else goes through _poll_growing.
            try:
                block = os.pread(self.fd, self.BLOCK_BYTES, self.offset)
            except OSError:
                block = b""
            n = len(block)
            if 0 < n < self.BLOCK_BYTES and not self.dropping and self.line_len + n <= self.LINE_CAP_BYTES:
                self.offset += n
                end = max(block.rfind(b"\n"), block.rfind(b"\r"))
                self.line_len = n - end - 1 if end >= 0 else self.line_len + n
                data = binascii.b2a_base64(block, newline=False).decode("ascii")
                if known is not None and known(self.key, (self.path, self.mtime, None)):
                    return {"key": self.key, "data": data, "size": self.offset}
                return {"key": self.key, "path": self.path, "data": data, "reset": False, "skipped": 0,
                        "size": self.offset, "mtime": self.mtime, "error": None, "cut": []}
            if n:
                chunk = self._poll_growing()  # (it reads the block again)
                if chunk is not None:
                    return chunk
        chunk = {"key": self.key, "path": self.path, "data": "", "reset": False, "skipped": 0,
                 "size": None, "mtime": None, "error": None, "cut": []}
        grew, self.grew = self.grew, 0
        self.checked_at = now
        out = bytearray()
        try:
            st = os.stat(self.path)
        except OSError as exc:
            chunk["error"] = exc.strerror or str(exc)
            if self.fd is not None:
                self._drain(out, chunk["cut"])  # deleted: keep what the old file still had
                self._close()
            chunk["data"] = _b64(bytes(out))
            return chunk
        chunk["size"], chunk["mtime"] = st.st_size, st.st_mtime
        self.mtime = st.st_mtime
        if self.fd is not None and (st.st_dev, st.st_ino) != self.ino:
            self._drain(out, chunk["cut"])  # rotated: finish the old file first
            self._close()
            chunk["reset"] = True
        if self.fd is None:
            try:
                st = self._open()
            except (OSError, IOError) as exc:
                chunk["error"] = exc.strerror or str(exc)
                chunk["data"] = _b64(bytes(out))
                return chunk
            start = max(0, st.st_size - self.backlog) if self.first else 0
            if not self.first:
                chunk["reset"] = True
            self.first = False
            self._new_file(start)
        elif st.st_size < self.offset:
            chunk["reset"] = True  # truncated
            self._new_file(0)
        pending = st.st_size - self.offset
        if pending > self.SCAN_CAP_BYTES:
            chunk["skipped"] = pending - self.SCAN_CAP_BYTES
            self._new_file(st.st_size - self.SCAN_CAP_BYTES)
        if pending > 0 or not S_ISREG(st.st_mode):  # nothing new: no seek, no read
            at_end = self._read(out, chunk["cut"], self.SCAN_CAP_BYTES)
            if at_end and self.regular and pending > 0:
                self.grew = grew + 1
        chunk["data"] = _b64(bytes(out))
        return chunk

    def _poll_growing(self):
        """poll's pread-only way: the chunk, or None when nothing came (then poll stats the path)."""
        start = self.offset
        out = bytearray()
        cuts = []
        try:
            at_end = self._read(out, cuts, self.SCAN_CAP_BYTES)
        except (OSError, IOError, ValueError):
            at_end = False  # what was read before the error still goes out; a full poll next
        if self.offset == start:
            return None
        size = self.offset
        if not at_end:  # more waits than one frame carries: its size from the descriptor, a full poll next
            self.grew = 0
            try:
                size = os.fstat(self.fd).st_size
            except OSError:
                size = None
        return {"key": self.key, "path": self.path, "data": _b64(bytes(out)), "reset": False, "skipped": 0,
                "size": size, "mtime": self.mtime, "error": None, "cut": cuts}

    def _new_file(self, offset):
        self.offset = offset
        self.line_len = 0
        self.dropping = 0

    def _read(self, out, cuts, budget):
        """Read up to `budget` bytes from the offset into `out`, cutting over-long lines. Returns
        whether it read up to the end of what is there now."""
        at_end = False
        while budget > 0 and len(out) < TAIL_CAP_BYTES:
            want = min(self.BLOCK_BYTES, budget)
            # pread: no seek, and a short block means the end of what is there now (no read for the EOF)
            block = os.pread(self.fd, want, self.offset) if self.regular else os.read(self.fd, want)
            if not block:
                at_end = True
                break
            budget -= len(block)
            self.offset += len(block)
            self._keep(block, out, cuts)
            if self.regular and len(block) < want:
                at_end = True
                break
        if self.dropping:
            # The long line is still being written: say so now, more may follow.
            cuts.append([len(out), self.dropping])
            self.dropping = 0
        return at_end

    def _keep(self, block, out, cuts):
        n = len(block)
        if not self.dropping and self.line_len + n <= self.LINE_CAP_BYTES:
            # No line in this block can reach the cap (the usual case): the block as it is, and the
            # current line is what follows its last newline or carriage return.
            out += block
            end = max(block.rfind(b"\n"), block.rfind(b"\r"))
            self.line_len = n - end - 1 if end >= 0 else self.line_len + n
            return
        i = 0
        while i < n:
            nl, cr = block.find(b"\n", i), block.find(b"\r", i)
            end = min(x for x in (nl, cr, n) if x >= 0)
            room = max(0, self.LINE_CAP_BYTES - self.line_len)
            take = min(end - i, room)
            out += block[i:i + take]
            self.line_len += take
            self.dropping += end - i - take
            if end == n:
                break
            if self.dropping:
                cuts.append([len(out), self.dropping])
                self.dropping = 0
            out += block[end:end + 1]  # a newline ends the line; a carriage return starts a new frame
            self.line_len = 0
            i = end + 1

    def _drain(self, out, cuts):
        try:
            self._read(out, cuts, self.SCAN_CAP_BYTES)
        except (OSError, IOError, ValueError):
            pass

    def close(self):
        self._close()


def _b64(data):
    return binascii.b2a_base64(data, newline=False).decode("ascii") if data else ""


def dir_stat(key, path):
    out = {"key": key, "path": path, "exists": False, "files": 0, "total_bytes": 0,
           "newest_mtime": None, "newest_name": None, "error": None}
    try:
        entries = list(os.scandir(path))[:DIR_ENTRY_CAP]
    except OSError as exc:
        out["error"] = exc.strerror or str(exc)
        return out
    out["exists"] = True
    seen = 0
    for entry in entries:
        candidates = [entry]
        try:
            if entry.is_dir(follow_symlinks=False):
                # checkpoints are often folders (checkpoint-500/): look one level in
                candidates = list(os.scandir(entry.path))[:200] or [entry]
        except OSError:
            pass
        for item in candidates:
            seen += 1
            if seen > DIR_ENTRY_CAP:
                break
            try:
                st = item.stat(follow_symlinks=False)
            except OSError:
                continue
            if item.is_file(follow_symlinks=False):
                out["files"] += 1
                out["total_bytes"] += st.st_size
            if out["newest_mtime"] is None or st.st_mtime > out["newest_mtime"]:
                out["newest_mtime"] = st.st_mtime
                out["newest_name"] = os.path.relpath(item.path, path)
    return out
