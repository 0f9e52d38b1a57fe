// A process-wide cache of core::Topology by the cluster it is built from (docs/block-eval.md,
// "Speed"): a sweep or tune evaluates many layouts of one cluster, and the periodic steady state
// runs two short pipelines on it, each of which built the same Topology again (about 2 ms for
// 1,024 GPUs). A Topology is a pure function of its ClusterSpec and LinkParams (its constructor
// reads nothing else), and the key compares both member by member (LinkParams' defaulted
// operator==; every member of ClusterSpec and the structs in it, by structured bindings that stop
// compiling when a member is added), so a hit returns an object equal to the one a miss would
// build: every route, rate and latency read from it, and so every figure computed with it, is the
// same to the bit. Entries are immutable and shared (its one lazy part, the inter-node route cache,
// is under a mutex), so the worker threads of a sweep may hold and read the same Topology.
#pragma once

#include <cstddef>
#include <memory>

#include "core/hardware/topology.hpp"
#include "core/scenario/scenario.hpp"

namespace csim::core {

// The Topology of `cluster` with `params`, built on the first request and kept for later ones
// (the most recently used kTopologyCacheEntries). Thread-safe.
std::shared_ptr<const Topology> shared_topology(const ClusterSpec& cluster,
                                                const LinkParams& params = LinkParams{});

inline constexpr std::size_t kTopologyCacheEntries = 8;

// Topologies built by shared_topology since the process started (misses; for the tests).
std::size_t topologies_built();

}  // namespace csim::core
