/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Pause points shared by the fakes: a thread that reaches an armed point parks there
 * until a test releases it. Every point counts its hits, armed or not, so a race test
 * can prove that the window it aims at was really hit. A point parks at most one
 * thread at a time; releasing also disarms it.
 */
#ifndef PEERMEM_FAKE_PAUSE_H
#define PEERMEM_FAKE_PAUSE_H

#include <linux/atomic.h>
#include <linux/jiffies.h>
#include <linux/sched.h>
#include <linux/spinlock.h>
#include <linux/wait.h>

struct fake_pause {
	spinlock_t lock;
	wait_queue_head_t wq;
	bool armed;
	struct task_struct *parked;
	u64 release_gen;
	atomic64_t hits;
};

static inline void fake_pause_init(struct fake_pause *p)
{
	spin_lock_init(&p->lock);
	init_waitqueue_head(&p->wq);
}

/* The point itself: counts the hit, parks the caller if armed. */
static inline void fake_pause_here(struct fake_pause *p)
{
	u64 gen;

	atomic64_inc(&p->hits);
	spin_lock(&p->lock);
	if (!p->armed || p->parked) {
		spin_unlock(&p->lock);
		return;
	}
	p->parked = current;
	gen = p->release_gen;
	spin_unlock(&p->lock);
	wake_up_all(&p->wq);
	wait_event(p->wq, READ_ONCE(p->release_gen) != gen);
}

static inline void fake_pause_arm(struct fake_pause *p)
{
	spin_lock(&p->lock);
	p->armed = true;
	spin_unlock(&p->lock);
}

static inline bool fake_pause_parked(struct fake_pause *p)
{
	bool r;

	spin_lock(&p->lock);
	r = p->parked != NULL;
	spin_unlock(&p->lock);
	return r;
}

/* Waits up to @timeout_ms for a thread to park; 0 or -ETIMEDOUT. */
static inline int fake_pause_wait(struct fake_pause *p, unsigned int timeout_ms)
{
	if (!wait_event_timeout(p->wq, fake_pause_parked(p), msecs_to_jiffies(timeout_ms)) &&
	    !fake_pause_parked(p))
		return -ETIMEDOUT;
	return 0;
}

/* Releases the parked thread, if any, and disarms the point. */
static inline void fake_pause_release(struct fake_pause *p)
{
	spin_lock(&p->lock);
	p->armed = false;
	if (p->parked) {
		p->parked = NULL;
		WRITE_ONCE(p->release_gen, p->release_gen + 1);
	}
	spin_unlock(&p->lock);
	wake_up_all(&p->wq);
}

static inline u64 fake_pause_hits(struct fake_pause *p)
{
	return atomic64_read(&p->hits);
}

#endif /* PEERMEM_FAKE_PAUSE_H */
