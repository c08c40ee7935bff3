# CTest smoke test of bench_train_step (run as `cmake -DBENCH=<binary> -P check_train_step.cmake`):
# a few steps of tiny GPT and BERT models print one JSON line with tokens/s > 0, and 30 steps on one
# repeated batch lower the loss below 4.8 (from ~ln 256 = 5.55; it reaches ~4.2 for GPT, ~3.9 for BERT).
foreach(arch gpt bert)
  set(tiny --arch ${arch} --d-model 32 --layers 2 --heads 2 --seq 16 --batch 4 --threads 1)
  execute_process(COMMAND ${BENCH} ${tiny} --steps 3 --warmup 1 OUTPUT_VARIABLE out RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${arch}: bench_train_step exited with ${rc}: ${out}")
  endif()
  string(JSON tokens_per_s GET "${out}" tokens_per_s)
  string(JSON flops GET "${out}" flops_per_token)
  string(JSON impl GET "${out}" impl)
  if(NOT impl STREQUAL "tapeformer" OR NOT tokens_per_s GREATER 0 OR NOT flops GREATER 0)
    message(FATAL_ERROR "${arch}: expected impl tapeformer, tokens_per_s > 0 and flops_per_token > 0: ${out}")
  endif()

  execute_process(COMMAND ${BENCH} ${tiny} --steps 30 --warmup 0 --repeat-batch OUTPUT_VARIABLE out RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${arch} --repeat-batch: bench_train_step exited with ${rc}: ${out}")
  endif()
  string(JSON first GET "${out}" loss_first)
  string(JSON last GET "${out}" loss_last)
  # if() compares reals (math() is integer-only): the start is near ln 256 = 5.55 (uniform
  # predictions from a 0.02-std init), and the end must be at least ~0.7 below it.
  if(NOT first GREATER 5.3 OR NOT last LESS 4.8)
    message(FATAL_ERROR "${arch}: 30 steps on one batch should take the loss from ~5.55 below 4.8: ${out}")
  endif()
  message(STATUS "${arch}: ${tokens_per_s} tokens/s; repeated batch loss ${first} -> ${last}")
endforeach()
