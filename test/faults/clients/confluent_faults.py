#!/usr/bin/env python3
"""confluent-kafka (librdkafka) clients for Strata's fault tests
(test/faults/clients_test.go): long-running roles that print one JSON event
per line on stdout, each stamped with the wall clock in microseconds ("ts"),
until stdin says "stop" or closes.

    confluent_faults.py member   '{"bootstrap": ..., "group": ..., "topic": ...}'
    confluent_faults.py pipeline '{"bootstrap": ..., "group": ..., "topic": ..., "out": ..., "transactional_id": ...}'
    confluent_faults.py produce  '{"bootstrap": ..., "topic": ..., "partitions": n, "count": n, "prefix": ...}'
"""
import json
import sys
import threading
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

stop = threading.Event()


def watch_stdin():
    for line in sys.stdin:
        if line.strip() == "stop":
            break
    stop.set()


def emit(ev):
    ev["ts"] = int(time.time() * 1e6)
    sys.stdout.write(json.dumps(ev) + "\n")
    sys.stdout.flush()


def code(err):
    if isinstance(err, KafkaException):
        err = err.args[0]
    if isinstance(err, KafkaError):
        return err.code()
    return -1


def consumer_conf(op, **extra):
    return {"bootstrap.servers": op["bootstrap"], "group.id": op["group"],
            "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "session.timeout.ms": 10000, "heartbeat.interval.ms": 500,
            "topic.metadata.refresh.interval.ms": 1000, **extra}


def member(op):
    """A group member that commits each record synchronously after printing
    it, and prints each commit the coordinator acknowledged. Errors (the
    coordinator's broker dying) are printed and the member goes on: the
    client rejoins by itself."""
    c = Consumer(consumer_conf(op))
    c.subscribe([op["topic"]],
                on_assign=lambda _, ps: emit({"event": "assigned", "partitions": sorted(p.partition for p in ps)}),
                on_revoke=lambda _, ps: emit({"event": "revoked", "partitions": sorted(p.partition for p in ps)}),
                on_lost=lambda _, ps: emit({"event": "revoked", "partitions": sorted(p.partition for p in ps)}))
    try:
        while not stop.is_set():
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                emit({"event": "error", "error_code": code(m.error()), "error": m.error().str()})
                continue
            emit({"event": "record", "partition": m.partition(), "offset": m.offset(), "value": m.value().decode()})
            try:
                done = c.commit(offsets=[TopicPartition(m.topic(), m.partition(), m.offset() + 1)], asynchronous=False)
                for tp in done or []:
                    if tp.error:
                        emit({"event": "error", "error_code": code(tp.error), "error": "commit: " + tp.error.str()})
                    else:
                        emit({"event": "committed", "partition": tp.partition, "offset": tp.offset})
            except KafkaException as e:
                emit({"event": "error", "error_code": code(e), "error": "commit: " + str(e)})
    finally:
        c.close()
    emit({"event": "closed"})


def pipeline(op):
    """A consume-transform-produce loop: each poll's records are copied to
    op["out"] in one transaction that also commits their offsets for the
    group (send_offsets_to_transaction). The first error ends the process
    with an "exit" event: the test starts it again, as an application
    would, and the new producer fences the old one and the group resumes
    from the offsets committed by committed transactions."""
    c = Consumer(consumer_conf(op, **{"isolation.level": "read_committed"}))
    p = Producer({"bootstrap.servers": op["bootstrap"], "transactional.id": op["transactional_id"],
                  "transaction.timeout.ms": 20000, "linger.ms": 5,
                  "topic.metadata.refresh.interval.ms": 1000})
    try:
        p.init_transactions(60)
        c.subscribe([op["topic"]],
                    on_assign=lambda _, ps: emit({"event": "assigned", "partitions": sorted(x.partition for x in ps)}))
        while not stop.is_set():
            msgs = c.consume(20, 0.5)
            msgs = [m for m in msgs if not m.error()]
            if not msgs:
                continue
            p.begin_transaction()
            for m in msgs:
                p.produce(op["out"], value=m.value(), key=m.key())
            nxt = {}
            for m in msgs:
                nxt[(m.topic(), m.partition())] = m.offset() + 1
            p.send_offsets_to_transaction([TopicPartition(t, q, o) for (t, q), o in nxt.items()],
                                          c.consumer_group_metadata(), 60)
            p.commit_transaction(60)
            emit({"event": "txn", "status": "ok", "count": len(msgs)})
    except KafkaException as e:
        emit({"event": "exit", "error_code": code(e), "error": str(e)})
        return
    finally:
        c.close()
    emit({"event": "closed"})


def produce(op):
    """An idempotent acks=all producer that sends op["count"] records
    (values prefix-0, prefix-1, ...) round-robin over the partitions, at
    most 100 unacknowledged at a time, and prints each record's outcome:
    ok with its offset, fail with the error (librdkafka reports a record
    as failed only when it is definitely not written, except for timeouts,
    which are printed as unknown)."""
    p = Producer({"bootstrap.servers": op["bootstrap"], "enable.idempotence": True, "acks": "all",
                  "linger.ms": 5, "message.timeout.ms": 120000,
                  "topic.metadata.refresh.interval.ms": 1000})
    pending = [0]

    def report(value, partition):
        def cb(err, msg):
            pending[0] -= 1
            if err is None:
                emit({"event": "ack", "status": "ok", "value": value, "partition": msg.partition(), "offset": msg.offset()})
            else:
                unknown = err.code() in (KafkaError._MSG_TIMED_OUT, KafkaError._TIMED_OUT, KafkaError.REQUEST_TIMED_OUT)
                emit({"event": "ack", "status": "unknown" if unknown else "fail", "value": value,
                      "partition": partition, "offset": -1, "error_code": code(err), "error": err.str()})
        return cb

    n = op["partitions"]
    for i in range(op["count"]):
        if stop.is_set():
            break
        while pending[0] >= 100:
            p.poll(0.05)
        value = "%s-%d" % (op["prefix"], i)
        emit({"event": "send", "value": value, "partition": i % n})
        pending[0] += 1
        p.produce(op["topic"], value=value.encode(), partition=i % n, on_delivery=report(value, i % n))
        p.poll(0)
        time.sleep(op.get("interval_ms", 0) / 1000.0)
    while pending[0] > 0:
        p.poll(0.1)
    emit({"event": "closed"})
    stop.wait()  # the test stops every role the same way


def main():
    role, op = sys.argv[1], json.loads(sys.argv[2])
    threading.Thread(target=watch_stdin, daemon=True).start()
    {"member": member, "pipeline": pipeline, "produce": produce}[role](op)


if __name__ == "__main__":
    main()
