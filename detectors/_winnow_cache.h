/* The bounded cache of words' keyed hashes for detectors/_winnow.c: open addressing, keyed by the unit's
 * UTF-8 bytes (up to 16 inline in the slot, longer ones in an arena), cleared when it reaches its bounds. */
#ifndef WINNOW_CACHE_H
#define WINNOW_CACHE_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static const uint64_t BASE = 0x9E3779B97F4A7C15ULL;
static const uint64_t MIX = 0xBF58476D1CE4E5B9ULL;
#define INLINE_KEY 16
typedef struct {
    uint64_t h;   /* hash of the key bytes (0: free slot) */
    uint64_t val; /* the unit's keyed hash */
    uint64_t k0, k1; /* keys of up to 16 bytes, zero-padded (most words): no arena access to compare */
    uint32_t off; /* longer keys: their bytes in the arena */
    uint32_t len;
} Entry;

typedef struct {
    Entry *table;
    size_t cap, count, max_units;
    uint8_t *arena;
    size_t arena_len, arena_cap, max_arena;
} UnitCache;


static uint64_t key_hash(const uint8_t *p, size_t n) {
    uint64_t h = 0x243F6A8885A308D3ULL ^ (n * BASE);
    while (n >= 8) {
        uint64_t x;
        memcpy(&x, p, 8);
        h = (h ^ x) * MIX;
        h ^= h >> 32;
        p += 8;
        n -= 8;
    }
    if (n) {
        uint64_t x = 0;
        memcpy(&x, p, n);
        h = (h ^ x) * MIX;
        h ^= h >> 32;
    }
    h *= BASE;
    h ^= h >> 29;
    return h ? h : 1;
}

static inline void inline_key(const uint8_t *key, size_t len, uint64_t *k0, uint64_t *k1) {
    uint8_t b[INLINE_KEY] = {0};
    memcpy(b, key, len);
    memcpy(k0, b, 8);
    memcpy(k1, b + 8, 8);
}

static void cache_clear(UnitCache *c) {
    if (c->table) memset(c->table, 0, c->cap * sizeof(Entry));
    c->count = 0;
    c->arena_len = 0;
}

static int cache_grow(UnitCache *c) {
    size_t cap = c->cap * 2;
    Entry *t = PyMem_Calloc(cap, sizeof(Entry));
    if (!t) {
        PyErr_NoMemory();
        return -1;
    }
    for (size_t i = 0; i < c->cap; i++) {
        Entry *e = &c->table[i];
        if (!e->h) continue;
        size_t s = (size_t)(e->h >> 7) & (cap - 1);
        while (t[s].h) s = (s + 1) & (cap - 1);
        t[s] = *e;
    }
    PyMem_Free(c->table);
    c->table = t;
    c->cap = cap;
    return 0;
}

/* 1 and *val if found, 0 if not. */
static int cache_find(UnitCache *c, const uint8_t *key, size_t len, uint64_t h, uint64_t *val) {
    size_t mask = c->cap - 1;
    size_t s = (size_t)(h >> 7) & mask;
    uint64_t k0 = 0, k1 = 0;
    if (len <= INLINE_KEY) inline_key(key, len, &k0, &k1);
    for (;;) {
        Entry *e = &c->table[s];
        if (!e->h) return 0;
        if (e->h == h && e->len == len &&
            (len <= INLINE_KEY ? e->k0 == k0 && e->k1 == k1 : memcmp(c->arena + e->off, key, len) == 0)) {
            *val = e->val;
            return 1;
        }
        s = (s + 1) & mask;
    }
}

static int cache_add(UnitCache *c, const uint8_t *key, size_t len, uint64_t h, uint64_t val) {
    uint64_t dummy;
    if (cache_find(c, key, len, h, &dummy)) return 0; /* the callback may have let another thread add it */
    if (c->count + 1 > c->max_units || c->arena_len + len > c->max_arena) cache_clear(c);
    if ((c->count + 1) * 2 > c->cap && cache_grow(c) < 0) return -1;
    uint64_t k0 = 0, k1 = 0;
    if (len <= INLINE_KEY) {
        inline_key(key, len, &k0, &k1);
    } else if (c->arena_len + len > c->arena_cap) {
        size_t cap = c->arena_cap ? c->arena_cap : 1 << 16;
        while (cap < c->arena_len + len) cap *= 2;
        uint8_t *a = PyMem_Realloc(c->arena, cap);
        if (!a) {
            PyErr_NoMemory();
            return -1;
        }
        c->arena = a;
        c->arena_cap = cap;
    }
    if (len > INLINE_KEY) memcpy(c->arena + c->arena_len, key, len);
    size_t mask = c->cap - 1;
    size_t s = (size_t)(h >> 7) & mask;
    while (c->table[s].h) s = (s + 1) & mask;
    c->table[s].h = h;
    c->table[s].val = val;
    c->table[s].k0 = k0;
    c->table[s].k1 = k1;
    c->table[s].off = (uint32_t)c->arena_len;
    c->table[s].len = (uint32_t)len;
    if (len > INLINE_KEY) c->arena_len += len;
    c->count++;
    return 0;
}

#endif
