#!/usr/bin/env node
// kafkajs driver for Strata's compat suite: reads one JSON operation on
// stdin, runs it against the broker and prints one JSON result line
// ({"error_code": 0, ...}). See test/compat/client_test.go.
'use strict'

const { Kafka, logLevel, CompressionTypes, ConfigResourceTypes } = require('kafkajs')
const kafkajsVersion = require('kafkajs/package.json').version

const OPS = ['create_topic', 'list_topics', 'describe_configs', 'alter_configs_legacy',
  'delete_records', 'delete_topic', 'produce', 'fetch', 'headers', 'null_record', 'log_append_time', 'offset_for_time', 'watermarks',
  'idempotent', 'timestamps', 'group_consume', 'transaction', 'isolation']

class OpError extends Error {
  constructor (code, msg) { super(msg); this.code = code }
}

// kafkaCode finds the Kafka error code in a (possibly wrapped) kafkajs error.
function kafkaCode (e, depth = 0) {
  if (!e || depth > 5) return -1
  if (typeof e.code === 'number' && e.code > 0) return e.code
  for (const sub of [e.cause, ...(e.errors || [])]) {
    const c = kafkaCode(sub, depth + 1)
    if (c > 0) return c
  }
  return -1
}

function describeError (e) {
  const parts = [`${e.name}: ${e.message}`]
  if (e.type) parts.push(`type=${e.type}`)
  if (e.cause) parts.push(`cause: ${describeError(e.cause)}`)
  for (const sub of e.errors || []) parts.push(`error: ${describeError(sub)}`)
  return parts.join('; ')
}

const str = (b) => (b === null || b === undefined ? null : b.toString())
const hdrs = (h) => {
  const pairs = Object.entries(h || {}).map(([k, v]) => [k, str(v)])
  return pairs.length ? pairs : null
}
const buf = (s) => (s === null || s === undefined ? null : Buffer.from(s))

function client (op) {
  const cfg = {
    clientId: 'strata-compat-kafkajs',
    brokers: [op.bootstrap],
    logLevel: logLevel.NOTHING,
    retry: { retries: 3, initialRetryTime: 100 }
  }
  if (op.sasl) { // kafkajs names mechanisms in lower case
    cfg.sasl = { mechanism: op.sasl.mechanism.toLowerCase(), username: op.sasl.username, password: op.sasl.password }
  }
  return new Kafka(cfg)
}

async function withAdmin (op, fn) {
  const admin = client(op).admin()
  await admin.connect()
  try { return await fn(admin) } finally { await admin.disconnect() }
}

const producers = new Map()

const codecs = { none: CompressionTypes.None, gzip: CompressionTypes.GZIP }

async function run (op) {
  const deadline = Date.now() + (op.timeout_ms || 30000)
  switch (op.op) {
    case 'versions':
      return { versions: { kafkajs: kafkajsVersion, node: process.versions.node }, ops: OPS, codecs: Object.keys(codecs) }
    case 'create_topic':
      return withAdmin(op, async (admin) => {
        const configEntries = Object.entries(op.configs || {}).map(([name, value]) => ({ name, value }))
        await admin.createTopics({
          waitForLeaders: true,
          topics: [{ topic: op.topic, numPartitions: op.partitions || 1, replicationFactor: op.replication_factor || 1, configEntries }]
        })
        return {}
      })
    case 'list_topics':
      return withAdmin(op, async (admin) => ({ topics: (await admin.listTopics()).sort() }))
    case 'describe_configs':
      return withAdmin(op, async (admin) => {
        const r = await admin.describeConfigs({ includeSynonyms: false, resources: [{ type: ConfigResourceTypes.TOPIC, name: op.topic }] })
        const res = r.resources[0]
        if (res.errorCode) throw new OpError(res.errorCode, res.errorMessage || 'describe failed')
        const configs = {}
        for (const e of res.configEntries) configs[e.configName] = e.configValue
        return { configs }
      })
    case 'alter_configs_legacy':
      return withAdmin(op, async (admin) => {
        const configEntries = Object.entries(op.configs || {}).map(([name, value]) => ({ name, value }))
        const r = await admin.alterConfigs({ validateOnly: false, resources: [{ type: ConfigResourceTypes.TOPIC, name: op.topic, configEntries }] })
        for (const res of r.resources) {
          if (res.errorCode) throw new OpError(res.errorCode, res.errorMessage || 'alter failed')
        }
        return {}
      })
    case 'delete_records':
      return withAdmin(op, async (admin) => {
        // kafkajs 2.2.4 deleteTopicRecords needs the topic's metadata loaded
        // first, or it fails with KafkaJSTopicMetadataNotLoaded.
        await admin.fetchTopicMetadata({ topics: [op.topic] })
        await admin.deleteTopicRecords({ topic: op.topic, partitions: [{ partition: op.partition || 0, offset: String(op.offset) }] })
        const offs = await admin.fetchTopicOffsets(op.topic)
        const p = offs.find((o) => o.partition === (op.partition || 0))
        return { offset: Number(p.low) }
      })
    case 'delete_topic':
      return withAdmin(op, async (admin) => { await admin.deleteTopics({ topics: [op.topic] }); return {} })
    case 'watermarks':
      return withAdmin(op, async (admin) => {
        const offs = await admin.fetchTopicOffsets(op.topic)
        const p = offs.find((o) => o.partition === (op.partition || 0))
        return { low: Number(p.low), high: Number(p.high) }
      })
    case 'offset_for_time':
      return withAdmin(op, async (admin) => {
        const offs = await admin.fetchTopicOffsetsByTimestamp(op.topic, op.timestamp)
        const p = offs.find((o) => o.partition === (op.partition || 0))
        return { offset: Number(p.offset) }
      })
    case 'produce': {
      // One producer per configuration for the whole process: a --session
      // keeps it (and its idempotent producer id) across operations.
      const key = JSON.stringify([op.bootstrap, !!op.idempotent, op.sasl || null])
      let producer = producers.get(key)
      if (!producer) {
        producer = client(op).producer(op.idempotent
          ? { idempotent: true, maxInFlightRequests: 1, allowAutoTopicCreation: false }
          : { allowAutoTopicCreation: false })
        await producer.connect()
        producers.set(key, producer)
      }
      const messages = (op.records || []).map((r) => {
        const m = { key: buf(r.key), value: buf(r.value), partition: op.partition || 0 }
        if (r.ts) m.timestamp = String(r.ts)
        if (r.headers) m.headers = Object.fromEntries(r.headers)
        return m
      })
      const res = await producer.send({ topic: op.topic, acks: -1, compression: codecs[op.compression || 'none'], messages })
      const base = Number(res[0].baseOffset)
      return { offsets: messages.map((_, i) => base + i) }
    }
    case 'transaction':
      return transaction(op)
    case 'fetch':
      return consume(op, deadline, `compat-fetch-${process.pid}-${Date.now()}`, false)
    case 'group_consume':
      return consume(op, deadline, op.group, true)
  }
  throw new OpError(-1, 'unsupported op ' + op.op)
}

// consume reads op.max records. kafkajs can only consume in a group: a fetch
// uses a fresh group and seeks the one partition to op.offset.
async function consume (op, deadline, groupId, commit) {
  const opts = { groupId, sessionTimeout: 10000, heartbeatInterval: 500, maxWaitTimeInMs: 200 }
  if (op.isolation) opts.readUncommitted = op.isolation === 'read_uncommitted'
  const consumer = client(op).consumer(opts)
  const want = op.max || 0
  const partition = op.partition || 0
  const seen = new Map()
  let failure = null
  await consumer.connect()
  try {
    await consumer.subscribe({ topics: [op.topic], fromBeginning: true })
    let done
    const finished = new Promise((resolve) => { done = resolve })
    await consumer.run({
      autoCommit: false,
      eachMessage: async ({ partition: p, message }) => {
        if (!commit && (p !== partition || (op.offset >= 0 && Number(message.offset) < op.offset))) return
        const key = `${p}:${message.offset}`
        if (!seen.has(key)) {
          seen.set(key, { key: str(message.key), value: str(message.value), ts: Number(message.timestamp), partition: p, offset: Number(message.offset), headers: hdrs(message.headers) })
        }
        if (commit) await consumer.commitOffsets([{ topic: op.topic, partition: p, offset: String(Number(message.offset) + 1) }])
        if (seen.size >= want) done()
      }
    })
    consumer.on(consumer.events.CRASH, (e) => { failure = e.payload.error; done() })
    if (!commit && op.offset >= 0) consumer.seek({ topic: op.topic, partition, offset: String(op.offset) })
    if (want > 0) {
      await Promise.race([finished, new Promise((resolve) => setTimeout(resolve, Math.max(0, deadline - Date.now())))])
    }
  } finally { await consumer.disconnect() }
  if (failure) throw failure
  const records = [...seen.values()].sort((a, b) => a.partition - b.partition || a.offset - b.offset).slice(0, want || undefined)
  return { records }
}

// transaction runs op.txns with one transactional producer: each produces
// its records, optionally sends a group offset, then commits or aborts.
async function transaction (op) {
  const producer = client(op).producer({ transactionalId: op.transactional_id, idempotent: true, maxInFlightRequests: 1, allowAutoTopicCreation: false })
  await producer.connect()
  const offsets = []
  try {
    for (const t of op.txns || []) {
      const txn = await producer.transaction()
      try {
        for (const r of t.records || []) {
          const res = await txn.send({ topic: op.topic, acks: -1, messages: [{ key: buf(r.key), value: buf(r.value), partition: r.partition || 0 }] })
          offsets.push(Number(res[0].baseOffset))
        }
        if (t.group) {
          await txn.sendOffsets({ consumerGroupId: t.group, topics: [{ topic: t.offset_topic, partitions: [{ partition: t.offset_partition || 0, offset: String(t.offset) }] }] })
        }
      } catch (e) {
        await txn.abort()
        throw e
      }
      if (t.abort) await txn.abort(); else await txn.commit()
    }
  } finally { await producer.disconnect() }
  return { offsets }
}

function emit (ev) { process.stdout.write(JSON.stringify(ev) + '\n') }

// groupMember is a streamed group member: it prints {"event": ...} lines for
// assignments and records (each committed once printed) until stdin says
// stop or closes, then leaves the group and prints {"event": "closed"}.
async function groupMember (op) {
  const consumer = client(op).consumer({ groupId: op.group, sessionTimeout: 10000, heartbeatInterval: 500, maxWaitTimeInMs: 200 })
  let stopping = false
  const stop = async () => {
    if (stopping) return
    stopping = true
    try { await consumer.disconnect() } catch (e) { emit({ event: 'error', error_code: kafkaCode(e), error: describeError(e) }) }
    emit({ event: 'closed' })
    process.exit(0)
  }
  process.stdin.on('data', (d) => { if (d.toString().includes('stop')) stop() })
  process.stdin.on('end', stop)
  consumer.on(consumer.events.GROUP_JOIN, (e) => {
    emit({ event: 'assigned', partitions: (e.payload.memberAssignment[op.topic] || []).slice().sort((a, b) => a - b) })
  })
  consumer.on(consumer.events.CRASH, (e) => emit({ event: 'error', error_code: kafkaCode(e.payload.error), error: describeError(e.payload.error) }))
  await consumer.connect()
  await consumer.subscribe({ topics: [op.topic], fromBeginning: true })
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ partition, message }) => {
      emit({ event: 'record', record: { key: str(message.key), value: str(message.value), ts: Number(message.timestamp), partition, offset: Number(message.offset) } })
      await consumer.commitOffsets([{ topic: op.topic, partition, offset: String(Number(message.offset) + 1) }])
    }
  })
}

async function runReported (op) {
  try {
    const res = await run(op)
    res.error_code = 0
    return res
  } catch (e) {
    return { error_code: e instanceof OpError ? e.code : kafkaCode(e), error: describeError(e) }
  }
}

// session runs one operation per stdin line and prints one result per line,
// keeping producers between operations.
async function session () {
  const rl = require('readline').createInterface({ input: process.stdin })
  for await (const line of rl) {
    if (line.trim()) emit(await runReported(JSON.parse(line)))
  }
  process.exit(0)
}

async function main () {
  if (process.argv[2] === '--member') return groupMember(JSON.parse(process.argv[3]))
  if (process.argv[2] === '--session') return session()
  const chunks = []
  for await (const c of process.stdin) chunks.push(c)
  const op = JSON.parse(Buffer.concat(chunks).toString())
  let res
  try {
    res = await run(op)
    res.error_code = 0
  } catch (e) {
    res = { error_code: e instanceof OpError ? e.code : kafkaCode(e), error: describeError(e) }
  }
  process.stdout.write('\n' + JSON.stringify(res) + '\n')
  process.exit(0)
}

main()
