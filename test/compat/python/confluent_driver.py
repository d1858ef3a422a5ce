#!/usr/bin/env python3
"""confluent-kafka (librdkafka) driver for Strata's compat suite.

Reads one JSON operation on stdin, runs it against the broker and prints one
JSON result line: {"error_code": 0, ...}. See test/compat/client_test.go.
"""
import json
import sys
import time
import uuid

import confluent_kafka
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

OPS = ["create_topic", "list_topics", "describe_configs", "alter_configs_legacy",
       "delete_topic", "produce", "fetch", "headers", "null_record", "log_append_time", "offset_for_time", "watermarks",
       "idempotent", "timestamps", "group_consume", "transaction", "isolation"]
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


class OpError(Exception):
    def __init__(self, code, msg):
        super().__init__(msg)
        self.code = code


def kerr(err):
    """Kafka error code of a KafkaError (librdkafka broker codes are Kafka's)."""
    code = err.code()
    return code if code >= 0 else -1


def wait_future(f):
    try:
        return f.result(timeout=30)
    except KafkaException as e:
        err = e.args[0]
        if isinstance(err, KafkaError):
            raise OpError(kerr(err), err.str())
        raise OpError(-1, str(e))


def hdrs(h):
    """Headers as [key, value] pairs, or None when there are none."""
    return [[k, dec(v)] for k, v in h] if h else None


def enc(s):
    return None if s is None else s.encode()


def dec(b):
    return None if b is None else b.decode()


_admin = []
_producers = {}


def base(op):
    """The connection settings of op: the bootstrap address and, when op
    carries SASL credentials, SASL_PLAINTEXT with them."""
    conf = {"bootstrap.servers": op["bootstrap"]}
    sasl = op.get("sasl")
    if sasl:
        conf.update({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": sasl["mechanism"],
                     "sasl.username": sasl["username"], "sasl.password": sasl["password"]})
    return conf


def admin(op):
    """An AdminClient kept alive until exit (futures die with their handle)."""
    a = AdminClient({**base(op)})
    _admin.append(a)
    return a


def run(op):
    name = op["op"]
    deadline = time.time() + op.get("timeout_ms", 30000) / 1000.0
    if name == "versions":
        return {"versions": {"confluent-kafka": confluent_kafka.version()[0],
                             "librdkafka": confluent_kafka.libversion()[0]},
                "ops": OPS, "codecs": CODECS}
    if name == "create_topic":
        fs = admin(op).create_topics([NewTopic(op["topic"], op.get("partitions", 1), op.get("replication_factor", 1),
                                               config=op.get("configs") or {})], operation_timeout=30)
        wait_future(fs[op["topic"]])
        return {}
    if name == "list_topics":
        md = admin(op).list_topics(timeout=30)
        return {"topics": sorted(t for t, m in md.topics.items() if m.error is None)}
    if name == "describe_configs":
        fs = admin(op).describe_configs([ConfigResource("topic", op["topic"])])
        entries = wait_future(list(fs.values())[0])
        return {"configs": {k: v.value for k, v in entries.items()}}
    if name == "alter_configs_legacy":
        fs = admin(op).alter_configs([ConfigResource("topic", op["topic"], set_config=op.get("configs") or {})])
        wait_future(list(fs.values())[0])
        return {}
    if name == "delete_topic":
        fs = admin(op).delete_topics([op["topic"]], operation_timeout=30)
        wait_future(fs[op["topic"]])
        return {}
    if name == "produce":
        conf = {**base(op), "acks": "all", "linger.ms": 20,
                "compression.type": op.get("compression") or "none",
                "message.send.max.retries": 3}
        if op.get("idempotent"):
            conf["enable.idempotence"] = True
        # One producer per configuration for the whole process: a --session
        # keeps it (and its idempotent producer id) across operations.
        key = json.dumps(conf, sort_keys=True)
        if key not in _producers:
            _producers[key] = Producer(conf)
        p = _producers[key]
        recs = op.get("records") or []
        offsets = [None] * len(recs)
        errors = []

        def cb(i):
            def done(err, msg):
                if err is not None:
                    errors.append(err)
                else:
                    offsets[i] = msg.offset()
            return done

        for i, r in enumerate(recs):
            kw = {"partition": op.get("partition", 0), "on_delivery": cb(i)}
            if r.get("ts"):
                kw["timestamp"] = r["ts"]
            if r.get("headers"):
                kw["headers"] = [(k, v.encode()) for k, v in r["headers"]]
            p.produce(op["topic"], value=enc(r.get("value")), key=enc(r.get("key")), **kw)
        left = p.flush(30)
        if errors:
            raise OpError(kerr(errors[0]), errors[0].str())
        if left:
            raise OpError(-1, "%d records not delivered within 30s" % left)
        return {"offsets": offsets}
    if name == "transaction":
        return transaction(op)
    if name == "fetch":
        conf = {**base(op), "group.id": "compat-fetch-" + uuid.uuid4().hex,
                "enable.auto.commit": False, "enable.partition.eof": False}
        if op.get("isolation"):
            conf["isolation.level"] = op["isolation"]
        c = Consumer(conf)
        c.assign([TopicPartition(op["topic"], op.get("partition", 0), op.get("offset", -2))])
        out = []
        want = op.get("max", 0)
        while len(out) < want and time.time() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                raise OpError(kerr(m.error()), m.error().str())
            out.append({"key": dec(m.key()), "value": dec(m.value()), "ts": m.timestamp()[1],
                        "partition": m.partition(), "offset": m.offset(), "headers": hdrs(m.headers())})
        c.close()
        return {"records": out}
    if name in ("offset_for_time", "watermarks"):
        c = Consumer({**base(op), "group.id": "compat-q-" + uuid.uuid4().hex})
        tp = TopicPartition(op["topic"], op.get("partition", 0), op.get("timestamp", 0))
        try:
            if name == "watermarks":
                lo, hi = c.get_watermark_offsets(tp, timeout=30, cached=False)
                return {"low": lo, "high": hi}
            res = c.offsets_for_times([tp], timeout=30)[0]
            if res.error:
                raise OpError(kerr(res.error), res.error.str())
            return {"offset": res.offset}
        except KafkaException as e:
            raise OpError(kerr(e.args[0]), str(e))
        finally:
            c.close()
    if name == "group_consume":
        return group_consume(op, deadline)
    raise OpError(-1, "unsupported op " + name)


def transaction(op):
    """One transactional producer runs op["txns"]: produce, maybe send a
    group offset, then commit or abort."""
    p = Producer({**base(op), "transactional.id": op["transactional_id"],
                  "linger.ms": 5})
    try:
        p.init_transactions(30)
        offsets = []
        errors = []

        def done(err, msg):
            if err is not None:
                errors.append(err)
            else:
                offsets.append(msg.offset())

        for t in op.get("txns") or []:
            p.begin_transaction()
            for r in t.get("records") or []:
                p.produce(op["topic"], value=enc(r.get("value")), key=enc(r.get("key")),
                          partition=r.get("partition", 0), on_delivery=done)
            p.flush(30)
            if errors:
                p.abort_transaction(30)
                raise OpError(kerr(errors[0]), errors[0].str())
            if t.get("group"):
                c = Consumer({**base(op), "group.id": t["group"]})
                try:
                    p.send_offsets_to_transaction(
                        [TopicPartition(t["offset_topic"], t.get("offset_partition", 0), t["offset"])],
                        c.consumer_group_metadata(), 30)
                finally:
                    c.close()
            if t.get("abort"):
                p.abort_transaction(30)
            else:
                p.commit_transaction(30)
        return {"offsets": offsets}
    except KafkaException as e:
        err = e.args[0]
        raise OpError(kerr(err) if isinstance(err, KafkaError) else -1, str(e))


def group_consume(op, deadline):
    """Subscribe in a group, consume max records, commit them, report them."""
    c = Consumer({**base(op), "group.id": op["group"],
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "session.timeout.ms": 10000, "heartbeat.interval.ms": 500})
    c.subscribe([op["topic"]])
    out = []
    want = op.get("max", 0)
    while len(out) < want and time.time() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            raise OpError(kerr(m.error()), m.error().str())
        out.append({"key": dec(m.key()), "value": dec(m.value()), "ts": m.timestamp()[1],
                    "partition": m.partition(), "offset": m.offset()})
    if out:
        c.commit(asynchronous=False)
    c.close()
    return {"records": out}


def emit(ev):
    sys.stdout.write(json.dumps(ev) + "\n")
    sys.stdout.flush()


def group_member(op):
    """Streamed group member: prints {"event": ...} lines for assignments and
    records (each committed synchronously once printed) until stdin says stop
    or closes, then leaves the group and prints {"event": "closed"}."""
    import threading
    stop = threading.Event()

    def watch_stdin():
        for line in sys.stdin:
            if line.strip() == "stop":
                break
        stop.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    c = Consumer({**base(op), "group.id": op["group"],
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "session.timeout.ms": 10000, "heartbeat.interval.ms": 500})

    def on_assign(consumer, parts):
        emit({"event": "assigned", "partitions": sorted(p.partition for p in parts)})

    def on_revoke(consumer, parts):
        emit({"event": "revoked", "partitions": sorted(p.partition for p in parts)})

    c.subscribe([op["topic"]], on_assign=on_assign, on_revoke=on_revoke)
    try:
        while not stop.is_set():
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                emit({"event": "error", "error_code": kerr(m.error()), "error": m.error().str()})
                continue
            emit({"event": "record", "record": {"key": dec(m.key()), "value": dec(m.value()),
                                                "ts": m.timestamp()[1], "partition": m.partition(),
                                                "offset": m.offset()}})
            c.commit(message=m, asynchronous=False)
    except KafkaException as e:
        emit({"event": "error", "error_code": kerr(e.args[0]), "error": str(e)})
    finally:
        c.close()
    emit({"event": "closed"})


def run_reported(op):
    try:
        res = run(op)
        res.setdefault("error_code", 0)
    except OpError as e:
        res = {"error_code": e.code, "error": str(e)}
    except Exception as e:  # report, don't crash: the Go test asserts on it
        res = {"error_code": -1, "error": "%s: %s" % (type(e).__name__, e)}
    return res


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--member":
        group_member(json.loads(sys.argv[2]))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--session":
        # One operation per stdin line, one result per stdout line, with
        # producers kept between operations.
        for line in sys.stdin:
            if line.strip():
                emit(run_reported(json.loads(line)))
        return
    op = json.load(sys.stdin)
    try:
        res = run(op)
        res.setdefault("error_code", 0)
    except OpError as e:
        res = {"error_code": e.code, "error": str(e)}
    except Exception as e:  # report, don't crash: the Go test asserts on it
        res = {"error_code": -1, "error": "%s: %s" % (type(e).__name__, e)}
    print(json.dumps(res))


if __name__ == "__main__":
    main()
