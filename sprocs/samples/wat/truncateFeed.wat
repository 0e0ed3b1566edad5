;; truncateFeed, hand-written against the partita_v1 ABI (host_api::abi).
;;
;; A post-trigger that keeps the newest 100 posts of a feed partition, as
;; sprocs/samples/js/truncateFeed.js does: count the partition's documents
;; (the count query does not see the document being inserted, hence + 1),
;; and when there are more than 100, query the oldest ones by creationDate
;; and delete each. It asks for their ids only (`VALUE f.id`), which is all a
;; delete needs, so it never has to parse a document.
;;
;; A failed operation fails the call (and the write that fired the trigger)
;; with the operation's status as substatus; NOT_ACCEPTED stops the trigger
;; and keeps what was done, as in JavaScript. Query pages hold at most 100
;; items by default, as there. An id with JSON escapes is refused with 400.
(module
  (import "partita_v1" "query" (func $query (param i32 i32 i32 i32) (result i32)))
  (import "partita_v1" "delete" (func $delete (param i32 i32 i32 i32) (result i32)))
  (import "partita_v1" "take_result" (func $take_result (param i32 i32) (result i32)))
  (import "partita_v1" "fail" (func $fail (param i32 i32 i32)))

  ;; 2 pages: the query request at 0, messages at 0x200, the page of
  ;; results from 0x1000 (up to 124 KiB: 100 ids of up to 255 bytes fit).
  (memory (export "memory") 2)
  (global $REQ i32 (i32.const 0x0000))
  (global $MSG i32 (i32.const 0x0200))
  (global $PAGE i32 (i32.const 0x1000))
  (global $PAGE_CAP i32 (i32.const 0x1f000))

  (data (i32.const 0x0400) "{\"query\":\"SELECT VALUE COUNT(1) FROM f\"}")              ;; 40
  (data (i32.const 0x0440) "{\"query\":\"SELECT TOP ")                                    ;; 21
  (data (i32.const 0x0460) " VALUE f.id FROM f ORDER BY f.creationDate\"}")             ;; 44
  (data (i32.const 0x04a0) "the query result is not what truncateFeed expects")         ;; 49
  (data (i32.const 0x04e0) "an id with JSON escapes is not supported")                  ;; 40

  ;; Fails the call with status `code` and the waiting message.
  (func $fail_with_result (param $code i32)
    (local $len i32)
    (local.set $len (call $take_result (global.get $MSG) (i32.const 0x200)))
    (if (i32.gt_u (local.get $len) (i32.const 0x200))
      (then (local.set $len (i32.const 0))))
    (call $fail (local.get $code) (global.get $MSG) (local.get $len)))

  (func $unexpected
    (call $fail (i32.const 400) (i32.const 0x04a0) (i32.const 49)))

  ;; Runs the query request at REQ..REQ+len into PAGE; returns the page's
  ;; length, or -1 when the query was not accepted.
  (func $run_query (param $len i32) (result i32)
    (local $r i32)
    (local.set $r (call $query (global.get $REQ) (local.get $len)
      (global.get $PAGE) (global.get $PAGE_CAP)))
    (if (i32.eq (local.get $r) (i32.const -1)) (then (return (i32.const -1))))
    (if (i32.lt_s (local.get $r) (i32.const 0))
      (then (call $fail_with_result (i32.sub (i32.const 0) (local.get $r)))))
    (if (i32.gt_u (local.get $r) (global.get $PAGE_CAP)) (then (call $unexpected)))
    (local.get $r))

  ;; The offset in PAGE just after the `[` that opens "items".
  (func $items (param $len i32) (result i32)
    (local $i i32)
    (loop $scan
      (if (i32.ge_u (local.get $i) (local.get $len)) (then (call $unexpected)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $scan (i32.ne (i32.load8_u (i32.add (global.get $PAGE) (i32.sub (local.get $i) (i32.const 1))))
        (i32.const 0x5b))))                                              ;; `[`
    (local.get $i))

  (func (export "partita_trigger") (result i32)
    (local $len i32) (local $i i32) (local $c i32) (local $count i32)
    (local $remove i32) (local $t i32) (local $digits i32) (local $start i32) (local $r i32)

    ;; 1. How many documents are there? The page is {"items":[N],...}.
    (memory.copy (global.get $REQ) (i32.const 0x0400) (i32.const 40))
    (local.set $len (call $run_query (i32.const 40)))
    (if (i32.lt_s (local.get $len) (i32.const 0)) (then (return (i32.const 0))))
    (local.set $i (call $items (local.get $len)))
    (block $done
      (loop $digit
        (local.set $c (i32.sub (i32.load8_u (i32.add (global.get $PAGE) (local.get $i))) (i32.const 48)))
        (br_if $done (i32.gt_u (local.get $c) (i32.const 9)))
        (local.set $count (i32.add (i32.mul (local.get $count) (i32.const 10)) (local.get $c)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $digit)))

    ;; 2. Keep 100, counting the document being inserted.
    (local.set $remove (i32.sub (i32.add (local.get $count) (i32.const 1)) (i32.const 100)))
    (if (i32.le_s (local.get $remove) (i32.const 0)) (then (return (i32.const 0))))

    ;; 3. The oldest `remove` ids: "SELECT TOP <remove> VALUE f.id ...".
    (memory.copy (global.get $REQ) (i32.const 0x0440) (i32.const 21))
    (local.set $t (local.get $remove))
    (loop $count_digits
      (local.set $digits (i32.add (local.get $digits) (i32.const 1)))
      (local.set $t (i32.div_u (local.get $t) (i32.const 10)))
      (br_if $count_digits (local.get $t)))
    (local.set $t (local.get $remove))
    (local.set $i (i32.add (i32.const 21) (local.get $digits)))
    (loop $write_digit
      (local.set $i (i32.sub (local.get $i) (i32.const 1)))
      (i32.store8 (i32.add (global.get $REQ) (local.get $i))
        (i32.add (i32.const 48) (i32.rem_u (local.get $t) (i32.const 10))))
      (local.set $t (i32.div_u (local.get $t) (i32.const 10)))
      (br_if $write_digit (i32.gt_u (local.get $i) (i32.const 21))))
    (memory.copy (i32.add (global.get $REQ) (i32.add (i32.const 21) (local.get $digits)))
      (i32.const 0x0460) (i32.const 44))
    (local.set $len (call $run_query (i32.add (i32.const 65) (local.get $digits))))
    (if (i32.lt_s (local.get $len) (i32.const 0)) (then (return (i32.const 0))))

    ;; 4. Delete each: the page is {"items":["id1","id2",...],...}.
    (local.set $i (call $items (local.get $len)))
    (block $end
      (loop $next
        (if (i32.ge_u (local.get $i) (local.get $len)) (then (call $unexpected)))
        (local.set $c (i32.load8_u (i32.add (global.get $PAGE) (local.get $i))))
        (br_if $end (i32.eq (local.get $c) (i32.const 0x5d)))               ;; `]`
        (if (i32.eq (local.get $c) (i32.const 0x2c))                         ;; `,`
          (then (local.set $i (i32.add (local.get $i) (i32.const 1))) (br $next)))
        (if (i32.ne (local.get $c) (i32.const 0x22)) (then (call $unexpected)))  ;; `"`
        (local.set $start (i32.add (local.get $i) (i32.const 1)))
        (loop $in_string
          (local.set $i (i32.add (local.get $i) (i32.const 1)))
          (if (i32.ge_u (local.get $i) (local.get $len)) (then (call $unexpected)))
          (local.set $c (i32.load8_u (i32.add (global.get $PAGE) (local.get $i))))
          (if (i32.eq (local.get $c) (i32.const 0x5c))                       ;; `\`
            (then (call $fail (i32.const 400) (i32.const 0x04e0) (i32.const 40))))
          (br_if $in_string (i32.ne (local.get $c) (i32.const 0x22))))
        (local.set $r (call $delete (i32.add (global.get $PAGE) (local.get $start))
          (i32.sub (local.get $i) (local.get $start)) (i32.const 0) (i32.const 0)))
        (if (i32.eq (local.get $r) (i32.const -1)) (then (return (i32.const 0))))
        (if (i32.lt_s (local.get $r) (i32.const 0))
          (then (call $fail_with_result (i32.sub (i32.const 0) (local.get $r)))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (i32.const 0))
)
