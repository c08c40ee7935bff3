// for_each_chunk: a text read in chunks (sources.h's TextStream), worked on in parallel, taken in
// order; the preparation of a corpus runs its passes through it (prepare.cpp).
//
// Note [the preparation pipeline]: reading, the work and the taking overlap. The calling thread
// reads chunks in order into a ring of slots; `workers` threads run `work(chunk, result)` on any
// read chunk; one thread runs `take(chunk, result)` on the chunks in order and frees their slots.
// A loop of batches (read a batch, work on it in parallel, take it) left the cores idle while one
// thread read and another wrote: the kernel's copies into and out of the page cache are a large
// part of the pass (prepare a char corpus: about a third of the samples, perf).
//
// Memory: 2 * workers + 2 slots, each a chunk's buffer and a Result, reused (fresh multi-megabyte
// buffers would cost a page fault per 4 KB, every chunk).
// Errors: `work` must not throw (it reports through its Result); `take` may, and so may reading.
// The first error in chunk order is raised, after the other threads have stopped: a chunk that
// failed to read is raised only after every chunk read before it was taken.
//
//   for_each_chunk<Encoded>(stream, 2, [&](Chunk& c, Encoded& e) {...}, [&](const Chunk& c, const Encoded& e) {...});
#pragma once
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "data/sources.h"

namespace tf::data {

template <typename Result, typename Work, typename Take>
void for_each_chunk(TextStream& stream, size_t workers, Work work, Take take) {
  using Chunk = TextStream::Chunk;
  enum class State { free, read, working, done };
  struct Slot {
    Chunk chunk;
    Result result{};
    State state = State::free;
  };
  const size_t n_slots = 2 * workers + 2;
  std::vector<Slot> slots(n_slots);
  std::mutex mutex;
  std::condition_variable changed;
  size_t read = 0, worked = 0, taken = 0;  // chunks read, handed to a worker, taken
  bool end = false, stop = false;
  std::exception_ptr read_error, take_error;
  std::vector<std::string> spare;  // taken chunks' buffers, for the reader to read into again

  std::vector<std::thread> threads;
  for (size_t w = 0; w < workers; ++w)
    threads.emplace_back([&] {
      for (;;) {
        std::unique_lock lock(mutex);
        changed.wait(lock, [&] { return stop || worked < read || end; });
        if (stop || worked == read) return;  // (end, and nothing left to work on)
        Slot& slot = slots[worked++ % n_slots];
        slot.state = State::working;
        lock.unlock();
        work(slot.chunk, slot.result);
        lock.lock();
        slot.state = State::done;
        changed.notify_all();
      }
    });
  threads.emplace_back([&] {  // the taker
    for (;;) {
      std::unique_lock lock(mutex);
      changed.wait(lock, [&] { return stop || (taken < read && slots[taken % n_slots].state == State::done) ||
                                      (end && taken == read); });
      if (stop || taken == read) return;
      Slot& slot = slots[taken % n_slots];
      lock.unlock();
      try {
        take(slot.chunk, slot.result);
      } catch (...) {
        lock.lock();
        take_error = std::current_exception();
        stop = true;
        changed.notify_all();
        return;
      }
      lock.lock();
      spare.push_back(std::move(slot.chunk.text));
      slot.state = State::free;
      ++taken;
      changed.notify_all();
    }
  });

  for (;;) {  // the reader: this thread
    std::unique_lock lock(mutex);
    changed.wait(lock, [&] { return stop || read - taken < n_slots; });
    if (stop) break;
    for (std::string& buffer : spare) stream.recycle(std::move(buffer));
    spare.clear();
    lock.unlock();
    std::optional<Chunk> chunk;
    try {
      chunk = stream.next();
    } catch (...) {
      lock.lock();
      read_error = std::current_exception();
      end = true;  // the chunks before it are still worked on and taken
      changed.notify_all();
      break;
    }
    lock.lock();
    if (!chunk) {
      end = true;
      changed.notify_all();
      break;
    }
    Slot& slot = slots[read % n_slots];
    slot.chunk = std::move(*chunk);
    slot.state = State::read;
    ++read;
    changed.notify_all();
  }
  for (std::thread& t : threads) t.join();
  if (take_error) std::rethrow_exception(take_error);
  if (read_error) std::rethrow_exception(read_error);
}

}  // namespace tf::data
