/*
 * Circular doubly-linked lists with a sentinel head, used for every queue in
 * the wheel (slots, the due list, the firing list, a collection's tail
 * part). A list is empty when its sentinel points at itself; a timer is
 * linked through its tw__link member.
 */
#ifndef TW_LIST_H
#define TW_LIST_H

#include <stddef.h>

#include "twheel.h"

typedef struct tw__link tw_link;

#define TW_TIMER_OF(link)                                                      \
  ((tw_timer *)(void *)((char *)(link)-offsetof(tw_timer, tw__link)))

static inline void tw__list_init(tw_link *head) {
  head->next = head;
  head->prev = head;
}

static inline int tw__list_empty(const tw_link *head) {
  return head->next == head;
}

static inline tw_timer *tw__list_first(const tw_link *head) {
  return TW_TIMER_OF(head->next);
}

static inline tw_timer *tw__list_last(const tw_link *head) {
  return TW_TIMER_OF(head->prev);
}

/* Links `node` just before `pos` (before the head: at the tail). The
 * node's two stores are apart: stored together, gcc pairs them into one
 * vector store, which costs two instructions more (so does twheel.h's
 * tw__slot_join). */
static inline void tw__list_insert_before(tw_link *pos, tw_link *node) {
  tw_link *prev = pos->prev;
  node->prev = prev;
  prev->next = node;
  node->next = pos;
  pos->prev = node;
}

static inline void tw__list_append(tw_link *head, tw_link *node) {
  tw__list_insert_before(head, node);
}

static inline void tw__list_prepend(tw_link *head, tw_link *node) {
  tw__list_insert_before(head->next, node);
}

static inline void tw__list_unlink(tw_link *node) {
  tw_link *prev = node->prev;
  tw_link *next = node->next;
  prev->next = next;
  next->prev = prev;
}

/* Moves every node of `from` to the tail of `to`; `from` ends empty. */
static inline void tw__list_splice(tw_link *to, tw_link *from) {
  if (tw__list_empty(from))
    return;
  from->next->prev = to->prev;
  to->prev->next = from->next;
  from->prev->next = to;
  to->prev = from->prev;
  tw__list_init(from);
}

#endif /* TW_LIST_H */
