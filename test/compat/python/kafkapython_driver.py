#!/usr/bin/env python3
"""kafka-python driver for Strata's compat suite.

Reads one JSON operation on stdin, runs it against the broker and prints one
JSON result line: {"error_code": 0, ...}. See test/compat/client_test.go.
"""
import json
import sys
import time

import kafka
import kafka.errors as Errors
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic
from kafka import codec

_for_code = Errors.for_code


def _for_code_keeping_unknown(code):
    """kafka-python maps codes it does not know (87 INVALID_RECORD) to
    UnknownError; keep the code so the suite can assert on it."""
    cls = _for_code(code)
    if cls is Errors.UnknownError and code not in (-1, 0):
        return type("KafkaError%d" % code, (Errors.UnknownError,), {"errno": code, "message": "CODE_%d" % code})
    return cls


Errors.for_code = _for_code_keeping_unknown

# kafka-python refuses a record with neither key nor value ("Need at least
# one: key or value"), so "null_record" is not listed.
OPS = ["create_topic", "list_topics", "describe_configs", "alter_configs_legacy",
       "delete_topic", "produce", "fetch", "headers", "log_append_time", "offset_for_time", "watermarks", "timestamps",
       "group_consume"]


class OpError(Exception):
    def __init__(self, code, msg):
        super().__init__(msg)
        self.code = code


def codecs():
    out = ["none", "gzip"]
    if codec.has_snappy():
        out.append("snappy")
    if codec.has_lz4():
        out.append("lz4")
    if codec.has_zstd():
        out.append("zstd")
    return out


def check(code, msg=""):
    if code:
        raise OpError(code, "%s %s" % (Errors.for_code(code).__name__, msg or ""))


def enc(s):
    return None if s is None else s.encode()


def dec(b):
    return None if b is None else b.decode()


def admin(op):
    return KafkaAdminClient(bootstrap_servers=op["bootstrap"], request_timeout_ms=30000)


def rec(m):
    return {"key": dec(m.key), "value": dec(m.value), "ts": m.timestamp,
            "partition": m.partition, "offset": m.offset,
            "headers": [[k, dec(v)] for k, v in m.headers] if m.headers else None}


def run(op):
    name = op["op"]
    deadline = time.time() + op.get("timeout_ms", 30000) / 1000.0
    if name == "versions":
        return {"versions": {"kafka-python": kafka.__version__}, "ops": OPS, "codecs": codecs()}
    if name == "create_topic":
        resp = admin(op).create_topics([NewTopic(op["topic"], op.get("partitions", 1), op.get("replication_factor", 1),
                                                 topic_configs=op.get("configs") or {})], timeout_ms=30000)
        for t in resp.topic_errors:
            check(t[1], t[2] if len(t) > 2 else "")
        return {}
    if name == "list_topics":
        return {"topics": sorted(admin(op).list_topics())}
    if name == "describe_configs":
        resps = admin(op).describe_configs([ConfigResource(ConfigResourceType.TOPIC, op["topic"])])
        out = {}
        for resp in resps:
            for r in resp.resources:
                check(r[0], r[1])
                for e in r[4]:
                    out[e[0]] = e[1]
        return {"configs": out}
    if name == "alter_configs_legacy":
        resp = admin(op).alter_configs([ConfigResource(ConfigResourceType.TOPIC, op["topic"],
                                                       configs=op.get("configs") or {})])
        for r in resp.resources:
            check(r[0], r[1])
        return {}
    if name == "delete_topic":
        resp = admin(op).delete_topics([op["topic"]], timeout_ms=30000)
        for t in resp.topic_error_codes:
            check(t[1])
        return {}
    if name == "produce":
        comp = op.get("compression") or "none"
        p = KafkaProducer(bootstrap_servers=op["bootstrap"], acks="all", linger_ms=20, retries=3,
                          compression_type=None if comp == "none" else comp, batch_size=1 << 20)
        futs = []
        for r in op.get("records") or []:
            futs.append(p.send(op["topic"], value=enc(r.get("value")), key=enc(r.get("key")),
                               partition=op.get("partition", 0), timestamp_ms=r.get("ts") or None,
                               headers=[(k, v.encode()) for k, v in r.get("headers") or []]))
        p.flush(30)
        offsets = []
        try:
            for f in futs:
                offsets.append(f.get(timeout=30).offset)
        except Errors.KafkaError as e:
            raise OpError(getattr(e, "errno", -1) or -1, "%s: %s" % (type(e).__name__, e))
        finally:
            p.close(5)
        return {"offsets": offsets}
    if name == "group_consume":
        # Subscribe in a group, consume max records, commit them, report them.
        c = KafkaConsumer(bootstrap_servers=op["bootstrap"], group_id=op["group"], enable_auto_commit=False,
                          auto_offset_reset="earliest", session_timeout_ms=10000, heartbeat_interval_ms=500,
                          fetch_max_wait_ms=200)
        try:
            c.subscribe([op["topic"]])
            out = []
            while len(out) < op.get("max", 0) and time.time() < deadline:
                for msgs in c.poll(timeout_ms=500).values():
                    out.extend(rec(m) for m in msgs)
            if out:
                c.commit()
            return {"records": out}
        except Errors.KafkaError as e:
            raise OpError(getattr(e, "errno", -1) or -1, "%s: %s" % (type(e).__name__, e))
        finally:
            c.close()
    tp = TopicPartition(op.get("topic"), op.get("partition", 0))
    c = KafkaConsumer(bootstrap_servers=op["bootstrap"], enable_auto_commit=False, group_id=None,
                      request_timeout_ms=30500, fetch_max_wait_ms=200)
    try:
        if name == "fetch":
            c.assign([tp])
            if op.get("offset", -2) == -2:
                c.seek_to_beginning(tp)
            else:
                c.seek(tp, op["offset"])
            out = []
            while len(out) < op.get("max", 0) and time.time() < deadline:
                for msgs in c.poll(timeout_ms=500).values():
                    out.extend(rec(m) for m in msgs)
            return {"records": out[:op.get("max", 0)]}
        if name == "offset_for_time":
            r = c.offsets_for_times({tp: op["timestamp"]})[tp]
            return {"offset": -1 if r is None else r.offset}
        if name == "watermarks":
            return {"low": c.beginning_offsets([tp])[tp], "high": c.end_offsets([tp])[tp]}
    finally:
        c.close()
    raise OpError(-1, "unsupported op " + name)


def emit(ev):
    sys.stdout.write(json.dumps(ev) + "\n")
    sys.stdout.flush()


def group_member(op):
    """Streamed group member: prints {"event": ...} lines for assignments and
    records (each committed synchronously once printed) until stdin says stop
    or closes, then leaves the group and prints {"event": "closed"}."""
    import threading
    from kafka import ConsumerRebalanceListener, OffsetAndMetadata
    stop = threading.Event()

    def watch_stdin():
        for line in sys.stdin:
            if line.strip() == "stop":
                break
        stop.set()

    threading.Thread(target=watch_stdin, daemon=True).start()

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            emit({"event": "revoked", "partitions": sorted(tp.partition for tp in revoked)})

        def on_partitions_assigned(self, assigned):
            emit({"event": "assigned", "partitions": sorted(tp.partition for tp in assigned)})

    c = KafkaConsumer(bootstrap_servers=op["bootstrap"], group_id=op["group"], enable_auto_commit=False,
                      auto_offset_reset="earliest", session_timeout_ms=10000, heartbeat_interval_ms=500,
                      fetch_max_wait_ms=200)
    c.subscribe([op["topic"]], listener=Listener())
    try:
        while not stop.is_set():
            for tp, msgs in c.poll(timeout_ms=200).items():
                for m in msgs:
                    emit({"event": "record", "record": rec(m)})
                    c.commit({tp: OffsetAndMetadata(m.offset + 1, None)})
    except Errors.KafkaError as e:
        emit({"event": "error", "error_code": getattr(e, "errno", -1) or -1, "error": "%s: %s" % (type(e).__name__, e)})
    finally:
        c.close()
    emit({"event": "closed"})


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--member":
        group_member(json.loads(sys.argv[2]))
        return
    op = json.load(sys.stdin)
    try:
        res = run(op)
        res.setdefault("error_code", 0)
    except OpError as e:
        res = {"error_code": e.code, "error": str(e)}
    except Errors.KafkaError as e:
        res = {"error_code": getattr(e, "errno", -1) or -1, "error": "%s: %s" % (type(e).__name__, e)}
    except Exception as e:  # report, don't crash: the Go test asserts on it
        res = {"error_code": -1, "error": "%s: %s" % (type(e).__name__, e)}
    print(json.dumps(res))


if __name__ == "__main__":
    main()
