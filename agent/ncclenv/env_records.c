#include "agent/ncclenv/env_records.h"

#include <stdlib.h>
#include <string.h>

int fabric_env_name_ok(const char* s, size_t n) {
  if (n == 0 || !(s[0] == '_' || (s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z'))) {
    return 0;
  }
  for (size_t i = 1; i < n; i++) {
    char c = s[i];
    if (!(c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) {
      return 0;
    }
  }
  return 1;
}

struct entry {
  const char* name;
  const char* value;
  size_t index; /* The record's place: the first of equal names sorts first. */
};

static int by_name(const void* a, const void* b) {
  const struct entry* x = a;
  const struct entry* y = b;
  int c = strcmp(x->name, y->name);
  if (c != 0) return c;
  return x->index < y->index ? -1 : x->index > y->index;
}

int fabric_env_table_parse(const char* bytes, size_t len, fabric_env_table* t, size_t* skipped) {
  memset(t, 0, sizeof *t);
  *skipped = 0;
  if (len > FABRIC_ENV_RECORDS_MAX_BYTES) return -1;
  /* A record ends at a NUL; bytes after the last NUL are a partial one. */
  size_t records = 0;
  for (size_t i = 0; i < len; i++) records += bytes[i] == '\0';
  if (records > FABRIC_ENV_RECORDS_MAX_COUNT) return -1;
  t->buf = malloc(len + 1);
  struct entry* entries = calloc(records + 1, sizeof *entries);
  if (t->buf == NULL || entries == NULL) {
    free(entries);
    fabric_env_table_free(t);
    return -1;
  }
  if (len) memcpy(t->buf, bytes, len);
  t->buf[len] = '\0';
  size_t n = 0;
  char* end = t->buf + len;
  for (char* rec = t->buf; rec < end;) {
    size_t rec_len = strlen(rec);
    if (rec + rec_len >= end) { /* No NUL after it: cut off. */
      if (rec_len) (*skipped)++;
      break;
    }
    char* eq = memchr(rec, '=', rec_len);
    if (eq != NULL && fabric_env_name_ok(rec, (size_t)(eq - rec))) {
      *eq = '\0';
      entries[n].name = rec;
      entries[n].value = eq + 1;
      entries[n].index = n;
      n++;
    } else if (rec_len) {
      (*skipped)++;
    }
    rec += rec_len + 1;
  }
  qsort(entries, n, sizeof *entries, by_name);
  t->names = calloc(n + 1, sizeof *t->names);
  t->values = calloc(n + 1, sizeof *t->values);
  if (t->names == NULL || t->values == NULL) {
    free(entries);
    fabric_env_table_free(t);
    return -1;
  }
  size_t kept = 0;
  for (size_t i = 0; i < n; i++) {
    if (kept > 0 && strcmp(t->names[kept - 1], entries[i].name) == 0) continue; /* First wins. */
    t->names[kept] = entries[i].name;
    t->values[kept] = entries[i].value;
    kept++;
  }
  t->count = kept;
  free(entries);
  return 0;
}

const char* fabric_env_table_get(const fabric_env_table* t, const char* name) {
  if (t == NULL || name == NULL) return NULL;
  size_t lo = 0, hi = t->count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = strcmp(t->names[mid], name);
    if (c == 0) return t->values[mid];
    if (c < 0) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return NULL;
}

void fabric_env_table_free(fabric_env_table* t) {
  free(t->buf);
  free((void*)t->names);
  free((void*)t->values);
  memset(t, 0, sizeof *t);
}
