#!/usr/bin/python3
"""check_sync.py - checks the checkpoint commit protocol in the system-call
traces that sync_trace.so wrote (tests/durability/sync_trace.c; standard
library only).

    check_sync.py [--expect-steps N] TRACE_DIR

Every trace.PID file of TRACE_DIR is read and the calls of all processes
are put in one order (the time each returned). A checkpoint root is a
directory in which step-N.tmp was renamed to step-N (or exchanged with it).
Under each root the file system is replayed, by inode, and two checks run:

The protocol (titan-checkpoint(5), WRITING A CHECKPOINT), for each step
published: every file in step-N.tmp (the rank data files, metadata.json)
was fsynced after its last write, and the directory after its last entry
was made, all before the rename; the root was fsynced after the rename and
before `latest` was replaced; latest.tmp was fsynced after its write and
before its rename, and the root after it; nothing in a published step is
written again; a root, or a directory above it, made in the trace was made
durable (its parent fsynced after it).

Power loss, emulated: after every call, the states a crash could leave
are built and `latest` must name a complete step in each. A crash keeps a
file's bytes only up to its last fsync (data written since is lost), and
keeps a directory's entries as of its last fsync plus any prefix of the
changes made to it since (a journal keeps a directory's own changes in
order, but directories independently of each other). Complete: the step's
directory holds every file it held when published, each with all its bytes.

Exit status 0 when both hold for every step and at least N steps were
published; 1 with a line per violation otherwise; 2 on bad input.
"""
import os
import re
import sys

O_CREAT, O_TRUNC = 0o100, 0o1000
RENAME_EXCHANGE = 2
STEP_TMP = re.compile(r"^(step-\d+)\.tmp$")


class Node:
    """A file or directory, by inode. pre: there before the trace began
    (its history unknown: taken for durable and complete)."""
    count = 0

    def __init__(self, kind, ino, pre=False):
        Node.count += 1
        self.id, self.kind, self.ino, self.pre = Node.count, kind, ino, pre
        self.label = ""  # a path it had, for messages
        # a file: writes made, writes made durable, its bytes (None: unknown)
        self.nw = self.synced = 0
        self.content = None if pre else b""
        self.dcontent = None
        self.last_write = self.last_sync = None
        self.published = None  # the step it belongs to, once published
        # a directory: entries now, the durable ones, changes since
        self.entries, self.floor, self.ops = {}, {}, []
        self.last_dsync = None
        self.pub = None  # a published step's directory: {name: (node, writes)}


def apply(entries, op):
    kind = op[0]
    if kind == "add":
        entries[op[1]] = op[2]
    elif kind == "del":
        entries.pop(op[1], None)
    elif kind == "rename":
        node = entries.pop(op[1], None)
        if node is not None:
            entries[op[2]] = node
    elif kind == "exchange":
        a, b = entries.get(op[1]), entries.get(op[2])
        entries[op[1]], entries[op[2]] = b, a
        for k in (op[1], op[2]):
            if entries[k] is None:
                del entries[k]


def prefixes(d):
    """Each state a crash may leave d's entries in."""
    e = dict(d.floor)
    yield e
    for op in d.ops:
        e = dict(e)
        apply(e, op)
        yield e


def parse(trace_dir):
    events = []
    for name in sorted(os.listdir(trace_dir)):
        if not name.startswith("trace."):
            continue
        with open(os.path.join(trace_dir, name), encoding="utf-8", errors="replace") as f:
            for line_no, line in enumerate(f):
                p = line.split()
                if len(p) < 6:
                    continue
                ev = {"t": int(p[0]), "pid": int(p[1]), "op": p[3], "ret": int(p[4]), "err": int(p[5]),
                      "line": line_no, "kv": {}, "paths": []}
                for w in p[6:]:
                    if "=" in w and not w.startswith("/"):
                        k, v = w.split("=", 1)
                        ev["kv"][k] = v
                    elif w.startswith("/"):
                        ev["paths"].append(w)
                events.append(ev)
    events.sort(key=lambda e: (e["t"], e["pid"], e["line"]))
    return events


def find_roots(events):
    roots = set()
    for ev in events:
        if ev["op"] == "rename" and ev["ret"] == 0 and len(ev["paths"]) == 2:
            a, b = ev["paths"]
            m = STEP_TMP.match(os.path.basename(a))
            if m and os.path.dirname(a) == os.path.dirname(b) and os.path.basename(b) == m.group(1):
                roots.add(os.path.dirname(a))
    return roots


class Replay:
    def __init__(self, roots):
        self.roots = {r: Node("d", None, pre=True) for r in roots}
        for r, n in self.roots.items():
            n.label = r
        self.by_ino = {}
        self.violations = []  # the protocol's
        self.lost = []  # the emulated power losses' (the first only: later ones follow from it)
        self.published = []  # (root, step, index)
        self.root_syncs = {r: [] for r in roots}
        self.latest_renames = {r: [] for r in roots}
        self.crash_states = 0
        self.i = 0
        self.mkdirs = []  # (index, path) of every directory made, roots or not
        self.dir_syncs = {}  # path -> indexes of its fsyncs, roots or not

    def bad(self, msg):
        self.violations.append(msg)

    # ---- names ----
    def root_of(self, path):
        for r in self.roots:
            if path == r or path.startswith(r + "/"):
                return r
        return None

    def lookup(self, path, make=True):
        """(parent directory node, name) of path under a root; the parent
        made (as pre-existing) when missing. (None, None) outside roots or
        for a root itself."""
        r = self.root_of(path)
        if r is None or path == r:
            return None, None
        parts = path[len(r) + 1:].split("/")
        d = self.roots[r]
        for comp in parts[:-1]:
            nxt = d.entries.get(comp)
            if nxt is None:
                if not make:
                    return None, None
                nxt = Node("d", None, pre=True)
                nxt.label = os.path.join(r, *parts[:parts.index(comp) + 1])
                d.entries[comp] = nxt
                d.floor[comp] = nxt
            d = nxt
        return d, parts[-1]

    def node(self, ino, path, kind="f"):
        """The node an fd call names: by inode, else by path (made as
        pre-existing, a `kind`, when unknown). None outside the roots."""
        r = self.root_of(path)
        if r is None:
            return None
        if path == r:
            n = self.roots[r]
            if ino and ino != "-":
                n.ino = ino
                self.by_ino[ino] = n
            return n
        if ino in self.by_ino:
            return self.by_ino[ino]
        d, name = self.lookup(path)
        n = d.entries.get(name)
        if n is None:
            n = Node(kind, ino, pre=True)
            d.entries[name] = n
            d.floor[name] = n
        n.label = n.label or path
        if ino and ino != "-":
            n.ino = ino
            self.by_ino[ino] = n
        return n

    def new_node(self, kind, ino, path):
        n = Node(kind, ino)
        n.label = path
        if ino and ino != "-":
            self.by_ino[ino] = n
        return n

    def dir_op(self, d, op):
        d.ops.append(op)
        apply(d.entries, op)

    # ---- the calls ----
    def sync_file(self, n):
        if n.kind == "d":
            n.floor, n.ops, n.last_dsync = dict(n.entries), [], self.i
        else:
            n.synced, n.dcontent, n.last_sync = n.nw, n.content, self.i

    def sync_all(self):
        seen = set()
        stack = list(self.roots.values())
        while stack:
            n = stack.pop()
            if n.id in seen:
                continue
            seen.add(n.id)
            self.sync_file(n)
            stack.extend(n.entries.values())
        for n in self.by_ino.values():
            if n.id not in seen:
                self.sync_file(n)

    def write(self, n, ev):
        if n.kind == "d":
            return
        if n.published:
            self.bad("%s: written after step %s was published" % (n.label, n.published))
        n.nw += 1
        n.last_write = self.i
        data = ev["kv"].get("data", "-")
        if n.content is not None and data != "-" and ev["kv"].get("off", "-1") == "-1":
            n.content += bytes.fromhex(data)
        else:
            n.content = None
        if ev["kv"].get("osync") == "1":
            self.sync_file(n)

    def publish(self, root, step, d):
        """Checks the step directory d at its publishing rename."""
        where = os.path.join(root, step)
        files = {k: v for k, v in d.entries.items() if v.kind == "f"}
        if "metadata.json" not in files:
            self.bad("%s: published without metadata.json" % where)
        if not any(k.startswith("rank-") for k in files):
            self.bad("%s: published without a rank data file" % where)
        for name, f in sorted(files.items()):
            if f.pre:
                continue
            if f.last_sync is None or (f.last_write is not None and f.last_sync < f.last_write):
                self.bad("%s/%s: not fsynced after its last write before the step's rename "
                         "(%d writes, %d synced)" % (where, name, f.nw, f.synced))
            f.published = step
        if d.last_dsync is None or d.ops:
            self.bad("%s.tmp: directory not fsynced after its last entry was made, before its rename" % where)
        d.pub = {k: (v, v.nw) for k, v in files.items()}
        d.label = where
        self.published.append((root, step, self.i))

    def rename(self, ev):
        a, b = ev["paths"]
        flags = int(ev["kv"].get("flags", "0"))
        pa, na = self.lookup(a)
        pb, nb = self.lookup(b)
        if pa is None or pb is None:
            return  # outside the roots (or a root itself)
        moved = pa.entries.get(na) or self.node(ev["kv"].get("ino"), a)
        root = self.root_of(a)
        m = STEP_TMP.match(na)
        if pa is self.roots[root] and pb is pa and m and nb == m.group(1) and moved.kind == "d":
            self.publish(root, nb, moved)
        if pa is self.roots[root] and pb is pa and na == "latest.tmp" and nb == "latest":
            if moved.last_sync is None or (moved.last_write is not None and moved.last_sync < moved.last_write):
                self.bad("%s: not fsynced after its write before its rename to latest" % a)
            self.latest_renames[root].append(self.i)
        if flags & RENAME_EXCHANGE:
            if pa is pb:
                self.dir_op(pa, ("exchange", na, nb))
            else:
                other = pb.entries.get(nb)
                self.dir_op(pa, ("add", na, other) if other else ("del", na))
                self.dir_op(pb, ("add", nb, moved))
        elif pa is pb:
            self.dir_op(pa, ("rename", na, nb))
        else:
            self.dir_op(pa, ("del", na))
            self.dir_op(pb, ("add", nb, moved))
        moved.label = b

    def event(self, ev):
        op, kv = ev["op"], ev["kv"]
        if ev["ret"] < 0 or op in ("dropped", "close", "sync_file_range"):
            return False  # sync_file_range makes nothing durable
        if op == "sync" or op == "syncfs":
            self.sync_all()
            return True
        if op == "mkdir" and ev["paths"]:
            self.mkdirs.append((self.i, ev["paths"][0]))
        if op in ("fsync", "fdatasync") and ev["paths"]:
            self.dir_syncs.setdefault(ev["paths"][0], []).append(self.i)
        if not ev["paths"] or self.root_of(ev["paths"][0]) is None and op != "rename":
            return False
        path = ev["paths"][0]
        kind = "d" if kv.get("type") == "d" else "f"
        if op == "open":
            flags = int(kv.get("flags", "0"), 16)
            if flags & O_CREAT and kv.get("new") == "1":
                d, name = self.lookup(path)
                if d is None:
                    return False
                self.dir_op(d, ("add", name, self.new_node("f", kv.get("ino"), path)))
            elif flags & O_TRUNC:
                n = self.node(kv.get("ino"), path)
                n.content = b""
                self.write(n, {"kv": {"data": "-"}})
            else:  # there before the trace, or made in it: known now
                n = self.node(kv.get("ino"), path, kind)
                if n.pre and n.nw == 0 and kv.get("data", "-") != "-":
                    n.content = n.dcontent = bytes.fromhex(kv["data"])
            return True
        if op == "write":
            self.write(self.node(kv.get("ino"), path), ev)
        elif op in ("fsync", "fdatasync"):
            n = self.node(kv.get("ino"), path, kind)
            self.sync_file(n)
            r = self.root_of(path)
            if path == r:
                self.root_syncs[r].append(self.i)
        elif op == "mkdir":
            d, name = self.lookup(path)
            if d is None:
                return False
            self.dir_op(d, ("add", name, self.new_node("d", kv.get("ino"), path)))
        elif op in ("unlink", "rmdir"):
            d, name = self.lookup(path)
            if d is None:
                return False
            if name not in d.entries:  # there before the trace: known now
                self.node(kv.get("ino"), path, "d" if op == "rmdir" else "f")
            self.dir_op(d, ("del", name))
        elif op == "rename" and len(ev["paths"]) == 2:
            self.rename(ev)
        else:
            return False
        return True

    # ---- a crash after the call just replayed ----
    def complete(self, d):
        """None when every state a crash may leave d in holds its step
        complete, else why not."""
        if d.pub is None and d.pre:  # there before: what was known of it must stay
            for e in prefixes(d):
                gone = sorted(k for k, v in d.floor.items() if e.get(k) is not v)
                if gone:
                    return "%s removed (the step was being deleted)" % gone[0]
            return None
        if d.pub is None:
            return "never published"
        for e in prefixes(d):
            for name, (f, writes) in sorted(d.pub.items()):
                if e.get(name) is not f:
                    return "%s missing (its directory entry not yet durable)" % name
                if f.synced < writes:
                    return "%s holds %d of its %d writes" % (name, f.synced, writes)
        return None

    @staticmethod
    def seen(d, name):
        return name in d.floor or name in d.entries or any(name in op[1:3] for op in d.ops)

    def crash(self, ev):
        for root, r in self.roots.items():
            for e in prefixes(r):
                self.crash_states += 1
                latest = e.get("latest")
                if latest is None or latest.pre and latest.nw == 0 and latest.dcontent is None:
                    continue  # none, or one from before the trace that was never read
                text = latest.dcontent  # its bytes as of its last fsync
                if not text:
                    self.lost.append("crash after %s %s: %s/latest would be empty (written, not yet synced)"
                                     % (ev["op"], " ".join(ev["paths"]), root))
                    return
                step = text.decode(errors="replace").strip()
                d = e.get(step)
                if d is None and not self.seen(r, step):
                    continue  # from before the trace and not touched in it: not ours to judge
                why = "missing" if d is None else self.complete(d)
                if why:
                    self.lost.append("crash after %s %s: %s/latest names %s: %s"
                                     % (ev["op"], " ".join(ev["paths"]), root, step, why))
                    return

    def finish(self):
        for root, step, i in self.published:
            syncs = [j for j in self.root_syncs[root] if j > i]
            later = [k for k in self.latest_renames[root] if k > i]
            if not syncs:
                self.bad("%s/%s: the root was not fsynced after the step's rename" % (root, step))
            elif later and later[0] < syncs[0]:
                self.bad("%s/%s: latest replaced before the root was fsynced after the step's rename"
                         % (root, step))
        for root in self.roots:
            for i, path in self.mkdirs:
                if path != root and not root.startswith(path + "/"):
                    continue
                parent = os.path.dirname(path)
                if not [j for j in self.dir_syncs.get(parent, []) if j > i]:
                    self.bad("%s: made for checkpoint root %s, but %s was not fsynced after" % (path, root, parent))
        for root, renames in self.latest_renames.items():
            for i in renames:
                if not [j for j in self.root_syncs[root] if j > i]:
                    self.bad("%s/latest: the root was not fsynced after its rename" % root)


def main(argv):
    expect = 0
    args = argv[1:]
    if len(args) >= 2 and args[0] == "--expect-steps":
        expect = int(args[1])
        args = args[2:]
    if len(args) != 1 or not os.path.isdir(args[0]):
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    events = parse(args[0])
    roots = find_roots(events)
    rp = Replay(roots)
    counts = {}
    for i, ev in enumerate(events):
        rp.i = i
        counts[ev["op"]] = counts.get(ev["op"], 0) + 1
        if rp.event(ev) and not rp.lost:
            rp.crash(ev)
    rp.finish()
    procs = len({ev["pid"] for ev in events})
    print("%d calls from %d processes (%s)" % (len(events), procs,
                                               ", ".join("%s %d" % kv for kv in sorted(counts.items()))))
    for root, step, _ in rp.published:
        print("published %s/%s" % (root, step))
    print("%d crash states emulated" % rp.crash_states)
    for v in rp.violations:
        print("VIOLATION (protocol): " + v)
    for v in rp.lost:
        print("VIOLATION (power loss): " + v)
    if len(rp.published) < expect:
        print("VIOLATION: %d steps published, expected at least %d" % (len(rp.published), expect))
        return 1
    return 1 if rp.violations or rp.lost else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
