/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/* Everything bindgen turns into bindings/bindings.rs (see scripts/gen-bindings). */
#include "nv-p2p.h"
#include "peer_mem.h"
#include "peermem_glue.h"
