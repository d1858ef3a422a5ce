#!/usr/bin/env node
// kafkajs clients for Strata's fault tests (test/faults/clients_test.go):
// long-running roles that print one JSON event per line on stdout, each
// stamped with the wall clock in microseconds ("ts"), until stdin says
// "stop" or closes. kafkajs comes from test/compat/node (NODE_PATH).
//
//   kafkajs_faults.js member   '{"bootstrap": ..., "group": ..., "topic": ...}'
//   kafkajs_faults.js pipeline '{"bootstrap": ..., "group": ..., "topic": ..., "out": ..., "transactional_id": ...}'
//   kafkajs_faults.js produce  '{"bootstrap": ..., "topic": ..., "partitions": n, "count": n, "prefix": ...}'
'use strict'

const { Kafka, logLevel } = require('kafkajs')

const nowMicros = () => Math.round((performance.timeOrigin + performance.now()) * 1000)
function emit (ev) { ev.ts = nowMicros(); process.stdout.write(JSON.stringify(ev) + '\n') }

function kafkaCode (e, depth = 0) {
  if (!e || depth > 5) return -1
  if (typeof e.code === 'number' && e.code > 0) return e.code
  for (const sub of [e.cause, ...(e.errors || [])]) {
    const c = kafkaCode(sub, depth + 1)
    if (c > 0) return c
  }
  return -1
}
const describe = (e) => `${e.name}: ${e.message}` + (e.cause ? `; cause: ${describe(e.cause)}` : '')

function client (op, retry = { retries: 10, initialRetryTime: 300, maxRetryTime: 3000 }) {
  return new Kafka({
    clientId: 'strata-faults-kafkajs',
    brokers: op.bootstrap.split(','),
    logLevel: logLevel.NOTHING,
    retry
  })
}

// onStop runs fn once when stdin says stop or closes.
function onStop (fn) {
  let stopping = false
  const stop = () => { if (!stopping) { stopping = true; fn() } }
  process.stdin.on('data', (d) => { if (d.toString().includes('stop')) stop() })
  process.stdin.on('end', stop)
}

// member commits each record after printing it and prints each commit the
// coordinator acknowledged; a failed commit is printed and the member goes
// on (kafkajs rejoins by itself), except for repeated NOT_COORDINATOR (16):
// kafkajs's OffsetManager keeps the coordinator it had at the last
// SyncGroup and only reconnects to that node id, never asking
// FindCoordinator again (kafkajs issue #1152), so once the coordinator
// moved and the old node is back, every commit of that member gets
// NOT_COORDINATOR forever (Kafka answers the same). An application's
// supervisor restarts such a member: the member exits and the test's
// supervisor starts a new one, which finds the coordinator.
async function member (op) {
  let notCoordinator = 0
  const consumer = client(op).consumer({ groupId: op.group, sessionTimeout: 10000, heartbeatInterval: 500, maxWaitTimeInMs: 200 })
  onStop(async () => {
    try { await consumer.disconnect() } catch (e) {}
    emit({ event: 'closed' })
    process.exit(0)
  })
  consumer.on(consumer.events.GROUP_JOIN, (e) => {
    emit({ event: 'assigned', partitions: (e.payload.memberAssignment[op.topic] || []).slice().sort((a, b) => a - b) })
  })
  consumer.on(consumer.events.CRASH, (e) => {
    emit({ event: 'error', error_code: kafkaCode(e.payload.error), error: 'crash: ' + describe(e.payload.error) })
    if (!e.payload.restart) { emit({ event: 'exit', error: 'crashed without restart' }); process.exit(1) }
  })
  await consumer.connect()
  await consumer.subscribe({ topics: [op.topic], fromBeginning: true })
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ partition, message }) => {
      const offset = Number(message.offset)
      emit({ event: 'record', partition, offset, value: message.value.toString() })
      try {
        await consumer.commitOffsets([{ topic: op.topic, partition, offset: String(offset + 1) }])
        emit({ event: 'committed', partition, offset: offset + 1 })
        notCoordinator = 0
      } catch (e) {
        const code = kafkaCode(e)
        emit({ event: 'error', error_code: code, error: 'commit: ' + describe(e) })
        if (code === 16 && ++notCoordinator >= 2) {
          emit({ event: 'exit', error_code: code, error: 'commits keep going to a node that is no longer the coordinator (kafkajs #1152): restart the member' })
          process.exit(1)
        }
      }
    }
  })
}

// pipeline copies each fetched batch to op.out in one transaction that also
// commits the batch's offsets for the group (sendOffsets). The first error
// ends the process with an "exit" event: the test starts it again, the new
// producer fences the old one and the group resumes from the offsets of
// committed transactions.
async function pipeline (op) {
  const kafka = client(op)
  const consumer = kafka.consumer({ groupId: op.group, sessionTimeout: 10000, heartbeatInterval: 500, maxWaitTimeInMs: 200, readUncommitted: false })
  const producer = kafka.producer({ transactionalId: op.transactional_id, idempotent: true, maxInFlightRequests: 1, transactionTimeout: 20000 })
  const fail = (e) => { emit({ event: 'exit', error_code: kafkaCode(e), error: describe(e) }); process.exit(1) }
  onStop(async () => {
    try { await consumer.disconnect(); await producer.disconnect() } catch (e) {}
    emit({ event: 'closed' })
    process.exit(0)
  })
  consumer.on(consumer.events.CRASH, (e) => fail(e.payload.error))
  consumer.on(consumer.events.GROUP_JOIN, (e) => {
    emit({ event: 'assigned', partitions: (e.payload.memberAssignment[op.topic] || []).slice().sort((a, b) => a - b) })
  })
  try {
    await producer.connect()
    await consumer.connect()
    await consumer.subscribe({ topics: [op.topic], fromBeginning: true })
  } catch (e) { fail(e) }
  await consumer.run({
    autoCommit: false,
    eachBatch: async ({ batch }) => {
      if (batch.messages.length === 0) return
      try {
        const txn = await producer.transaction()
        try {
          // An explicit partition: kafkajs 2.2.4 runs its partitioner again
          // on every retry of a send, so keyless records spread round robin
          // can go to another partition the second time (written twice,
          // others never: docs/compatibility.md).
          await txn.send({ topic: op.out, acks: -1, messages: batch.messages.map((m) => ({ key: m.key, value: m.value, partition: batch.partition })) })
          const next = String(Number(batch.messages[batch.messages.length - 1].offset) + 1)
          await txn.sendOffsets({ consumerGroupId: op.group, topics: [{ topic: op.topic, partitions: [{ partition: batch.partition, offset: next }] }] })
          await txn.commit()
        } catch (e) {
          try { await txn.abort() } catch (e2) {}
          throw e
        }
        emit({ event: 'txn', status: 'ok', count: batch.messages.length })
      } catch (e) { fail(e) }
    }
  })
}

// produce is an idempotent acks=all producer sending op.count records
// (values prefix-0, prefix-1, ...) round-robin over op.partitions
// partitions, in sends of ten records awaited one after the other, and
// printing each record's outcome: ok with its offset (a send's records for
// one partition are stored in order from that partition's base offset), or
// unknown with the error once kafkajs gives up (its errors do not say
// whether the records were written). Every record names its partition:
// kafkajs 2.2.4 runs its partitioner again on every retry of a send, so
// partitioner-placed keyless records could be written to two partitions.
async function produce (op) {
  const producer = client(op, { retries: 30, initialRetryTime: 300, maxRetryTime: 2000 })
    .producer({ idempotent: true, maxInFlightRequests: 1 })
  let stopping = false
  onStop(() => { stopping = true })
  await producer.connect()
  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
  for (let i = 0; i < op.count && !stopping; i += 10) {
    const recs = []
    for (let j = i; j < Math.min(i + 10, op.count); j++) {
      recs.push({ value: `${op.prefix}-${j}`, partition: j % op.partitions })
    }
    for (const r of recs) emit({ event: 'send', value: r.value, partition: r.partition })
    try {
      const res = await producer.send({ topic: op.topic, acks: -1, messages: recs })
      const base = new Map(res.map((m) => [m.partition, Number(m.baseOffset)]))
      const next = new Map()
      for (const r of recs) {
        const k = next.get(r.partition) || 0
        next.set(r.partition, k + 1)
        emit({ event: 'ack', status: 'ok', value: r.value, partition: r.partition, offset: base.get(r.partition) + k })
      }
    } catch (e) {
      for (const r of recs) {
        emit({ event: 'ack', status: 'unknown', value: r.value, partition: r.partition, offset: -1, error_code: kafkaCode(e), error: describe(e) })
      }
    }
    if (op.interval_ms) await sleep(op.interval_ms)
  }
  try { await producer.disconnect() } catch (e) {}
  emit({ event: 'closed' })
  // The test stops every role the same way: wait for stop.
  if (!stopping) await new Promise((resolve) => onStop(resolve))
  process.exit(0)
}

const roles = { member, pipeline, produce }
roles[process.argv[2]](JSON.parse(process.argv[3])).catch((e) => {
  emit({ event: 'exit', error_code: kafkaCode(e), error: describe(e) })
  process.exit(1)
})
