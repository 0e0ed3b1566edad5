;; readFeed for the benchmark harness, against the partita_v1 ABI
;; (host_api::abi): the feed read (Q6) as a WebAssembly procedure, as the
;; JavaScript flavor runs it as a procedure. It runs the query once and sets
;; the whole page ({"items": [...], "continuation": ...}) as the response
;; body, without parsing it; the caller takes the items. A page larger than
;; the buffer, or a failed query, fails the call with the status.
(module
  (import "partita_v1" "query" (func $query (param i32 i32 i32 i32) (result i32)))
  (import "partita_v1" "set_response_body" (func $set_body (param i32 i32) (result i32)))
  (import "partita_v1" "fail" (func $fail (param i32 i32 i32)))

  ;; 8 pages (512 KiB): the request at 0, the page from 0x1000.
  (memory (export "memory") 8)
  (data (i32.const 0) "{\"query\":\"SELECT TOP 100 * FROM f ORDER BY f.creationDate DESC\"}") ;; 64
  (data (i32.const 0x100) "the feed page did not fit or the query failed") ;; 45

  (func (export "partita_procedure") (result i32)
    (local $r i32)
    (local.set $r (call $query (i32.const 0) (i32.const 64) (i32.const 0x1000) (i32.const 0x7f000)))
    ;; A failed query: its status as substatus; a page too large: 413.
    (if (i32.lt_s (local.get $r) (i32.const 0))
      (then (call $fail (i32.sub (i32.const 0) (local.get $r)) (i32.const 0x100) (i32.const 45))))
    (if (i32.gt_s (local.get $r) (i32.const 0x7f000))
      (then (call $fail (i32.const 413) (i32.const 0x100) (i32.const 45))))
    (local.set $r (call $set_body (i32.const 0x1000) (local.get $r)))
    (if (i32.lt_s (local.get $r) (i32.const 0))
      (then (call $fail (i32.sub (i32.const 0) (local.get $r)) (i32.const 0x100) (i32.const 45))))
    (i32.const 0)))
