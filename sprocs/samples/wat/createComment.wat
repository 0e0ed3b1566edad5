;; createComment, hand-written against the partita_v1 ABI (host_api::abi).
;;
;; A stored procedure called with [postId, comment]: reads the post's
;; commentCount, adds one to it, replaces the post with the new count, and
;; creates the comment with "postId" set, all in one transaction, as
;; sprocs/samples/js/createComment.js does. The comment's "id" is the one
;; given, or one the host generates (create without options).
;;
;; The post never crosses the boundary: read_member sends only its
;; commentCount's text and replace_member sets it, which stores what reading
;; the whole post, changing the count and replacing it stores (and the host
;; does not read the post twice), without the host serializing the post
;; into guest memory and parsing it back.
;;
;; A failed operation fails the call with the operation's status as the
;; substatus and the host's message, as an unhandled `throw err` does in
;; JavaScript; NOT_ACCEPTED ends the call early and keeps what was done, as
;; an operation that returned false does there.
;;
;; No JSON library: the host writes compact JSON (serde_json), so the
;; parameters are `["<postId>",{...}]` and the count is the digits
;; read_member returns. Limits of this small guest, each refused with 400: a
;; postId with JSON escapes, a commentCount that is not a non-negative
;; integer below 10^18, and a comment whose first "postId" key (at any
;; depth) is not the post's id (JavaScript's `comment.postId = postId`
;; overwrites it; here appending a second would be a duplicate member,
;; which the host refuses).
;;
;; Memory: the usual small call works in one 64 KiB page (16 KiB buffers
;; for the parameters and the comment being written, a small one for the
;; count, then the message buffer and the constants), which the host resets
;; cheaply after the call. Parameters larger than their 16 KiB buffer wait
;; on the host; the module then grows its memory to 67 pages and fetches
;; them with take_result into its large buffer (up to 2.06 MiB each:
;; documents are at most 2 MB).
(module
  (import "partita_v1" "params" (func $params (param i32 i32) (result i32)))
  (import "partita_v1" "read_member"
    (func $read_member (param i32 i32 i32 i32 i32 i32) (result i32)))
  (import "partita_v1" "replace_member"
    (func $replace_member (param i32 i32 i32 i32 i32 i32 i32 i32 i32 i32) (result i32)))
  (import "partita_v1" "create"
    (func $create (param i32 i32 i32 i32 i32 i32) (result i32)))
  (import "partita_v1" "take_result" (func $take_result (param i32 i32) (result i32)))
  (import "partita_v1" "fail" (func $fail (param i32 i32 i32)))

  ;; One page; 67 (4.2 MiB) once a large buffer is needed.
  (memory (export "memory") 1)
  (global $PARAMS i32 (i32.const 0x0000))     ;; the parameters (small)
  (global $OUT i32 (i32.const 0x4000))        ;; the comment being written (small)
  (global $SMALL i32 (i32.const 0x4000))      ;; capacity of each small buffer
  (global $COUNT i32 (i32.const 0x8000))      ;; the count as read, 32 bytes
  (global $NEW_COUNT i32 (i32.const 0x8020))  ;; the count as written, 32 bytes
  (global $MSG i32 (i32.const 0xc000))        ;; an error message, 4 KiB
  (global $PARAMS_BIG i32 (i32.const 0x010000))
  (global $OUT_BIG i32 (i32.const 0x220000))  ;; room up to 0x430000
  (global $CAP i32 (i32.const 0x210000))      ;; capacity of each large buffer

  (data (i32.const 0xd000) "commentCount")                       ;; 12 bytes
  (data (i32.const 0xd010) "\"postId\":")                       ;; 9 bytes
  (data (i32.const 0xd020) "createComment expects [postId, comment]") ;; 39
  (data (i32.const 0xd050) "postId with JSON escapes is not supported") ;; 41
  (data (i32.const 0xd080) "the post has no integer commentCount") ;; 36
  (data (i32.const 0xd0b0) "a document is over 2 MB")            ;; 23
  (data (i32.const 0xd0d0) "cannot grow the memory for a large document") ;; 43
  (data (i32.const 0xd100) "a comment with another postId is not supported") ;; 46

  ;; Fails the call with status `code` and the message waiting for
  ;; take_result (what the failed operation said).
  (func $fail_with_result (param $code i32)
    (local $len i32)
    (local.set $len (call $take_result (global.get $MSG) (i32.const 4096)))
    (if (i32.gt_u (local.get $len) (i32.const 4096))
      (then (local.set $len (i32.const 0))))
    (call $fail (local.get $code) (global.get $MSG) (local.get $len)))

  ;; Fails the call with 400 and the fixed message at `msg`.
  (func $bad (param $msg i32) (param $len i32)
    (call $fail (i32.const 400) (local.get $msg) (local.get $len)))

  ;; The offset of the first `needle` in `hay`, or -1.
  (func $find (param $hay i32) (param $hay_len i32) (param $needle i32) (param $needle_len i32)
    (result i32)
    (local $i i32) (local $j i32)
    (block $not_found
      (loop $next
        (br_if $not_found
          (i32.gt_s (i32.add (local.get $i) (local.get $needle_len)) (local.get $hay_len)))
        (local.set $j (i32.const 0))
        (block $mismatch
          (loop $compare
            (if (i32.eq (local.get $j) (local.get $needle_len))
              (then (return (local.get $i))))
            (br_if $mismatch
              (i32.ne
                (i32.load8_u (i32.add (local.get $hay) (i32.add (local.get $i) (local.get $j))))
                (i32.load8_u (i32.add (local.get $needle) (local.get $j)))))
            (local.set $j (i32.add (local.get $j) (i32.const 1)))
            (br $compare)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (i32.const -1))

  ;; Writes `n` in decimal at `dst`; returns the length.
  (func $itoa (param $n i64) (param $dst i32) (result i32)
    (local $len i32) (local $t i64)
    ;; Count the digits, then write them from the end.
    (local.set $t (local.get $n))
    (loop $count
      (local.set $len (i32.add (local.get $len) (i32.const 1)))
      (local.set $t (i64.div_u (local.get $t) (i64.const 10)))
      (br_if $count (i64.ne (local.get $t) (i64.const 0))))
    (local.set $t (i64.extend_i32_u (local.get $len)))
    (loop $digit
      (local.set $t (i64.sub (local.get $t) (i64.const 1)))
      (i64.store8 (i32.add (local.get $dst) (i32.wrap_i64 (local.get $t)))
        (i64.add (i64.const 48) (i64.rem_u (local.get $n) (i64.const 10))))
      (local.set $n (i64.div_u (local.get $n) (i64.const 10)))
      (br_if $digit (i64.ne (local.get $t) (i64.const 0))))
    (local.get $len))

  ;; Fetches a result of `len` bytes that did not fit its small buffer into
  ;; the large buffer at `big`, and returns `big`; fails with 400 when it
  ;; would not fit there either.
  (func $take_big (param $len i32) (param $big i32) (result i32)
    (if (i32.gt_u (local.get $len) (global.get $CAP))
      (then (call $bad (i32.const 0xd0b0) (i32.const 23))))
    (call $grow_for_big)
    (drop (call $take_result (local.get $big) (global.get $CAP)))
    (local.get $big))

  ;; Where to write a document of at most `len` bytes.
  (func $out_for (param $len i32) (result i32)
    (if (result i32) (i32.gt_u (local.get $len) (global.get $SMALL))
      (then (call $grow_for_big) (global.get $OUT_BIG))
      (else (global.get $OUT))))

  ;; Grows the memory to the 67 pages the large buffers need (once); fails
  ;; with 400 when the host refuses (its memory limit).
  (func $grow_for_big
    (local $pages i32)
    (local.set $pages (memory.size))
    (if (i32.lt_u (local.get $pages) (i32.const 67))
      (then
        (if (i32.eq (memory.grow (i32.sub (i32.const 67) (local.get $pages))) (i32.const -1))
          (then (call $bad (i32.const 0xd0d0) (i32.const 43)))))))

  (func (export "partita_procedure") (result i32)
    (local $n i32) (local $i i32) (local $id_len i32)
    (local $comment i32) (local $comment_len i32)
    (local $r i32) (local $at i32) (local $end i32)
    (local $count i64) (local $len i32) (local $c i32)
    (local $p i32) (local $out i32) (local $has_post_id i32)

    ;; 1. The parameters: ["<postId>",{...comment...}].
    (local.set $p (global.get $PARAMS))
    (local.set $n (call $params (local.get $p) (global.get $SMALL)))
    (if (i32.gt_u (local.get $n) (global.get $SMALL))
      (then (local.set $p (call $take_big (local.get $n) (global.get $PARAMS_BIG)))))
    (if (i32.or (i32.lt_u (local.get $n) (i32.const 6))
          (i32.ne (i32.load16_u (local.get $p)) (i32.const 0x225b))) ;; `["`
      (then (call $bad (i32.const 0xd020) (i32.const 39))))
    ;; The id runs from offset 2 to the closing quote.
    (local.set $i (i32.const 2))
    (block $closed
      (loop $scan
        (if (i32.ge_u (local.get $i) (local.get $n))
          (then (call $bad (i32.const 0xd020) (i32.const 39))))
        (local.set $c (i32.load8_u (i32.add (local.get $p) (local.get $i))))
        (br_if $closed (i32.eq (local.get $c) (i32.const 0x22)))  ;; `"`
        (if (i32.eq (local.get $c) (i32.const 0x5c))                ;; `\`
          (then (call $bad (i32.const 0xd050) (i32.const 41))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $scan)))
    (local.set $id_len (i32.sub (local.get $i) (i32.const 2)))
    ;; Then `,{` ... `}]`: the comment is everything between `,` and `]`.
    (local.set $comment (i32.add (local.get $p) (i32.add (local.get $i) (i32.const 2))))
    (local.set $comment_len (i32.sub (local.get $n) (i32.add (local.get $i) (i32.const 3))))
    (if (i32.or
          (i32.ne (i32.load16_u (i32.add (local.get $p) (i32.add (local.get $i) (i32.const 1))))
            (i32.const 0x7b2c))                                      ;; `,{`
          (i32.ne (i32.load16_u (i32.add (local.get $p) (i32.sub (local.get $n) (i32.const 2))))
            (i32.const 0x5d7d)))                                     ;; `}]`
      (then (call $bad (i32.const 0xd020) (i32.const 39))))

    ;; A comment that has its "postId" already is written as it is when
    ;; that is the post's id (the blog's comments carry it), and refused
    ;; otherwise: appending a second one would be a duplicate member, which
    ;; the host refuses. (The first "postId" key at any depth counts.)
    (local.set $at (call $find (local.get $comment) (local.get $comment_len)
      (i32.const 0xd010) (i32.const 9)))
    (if (i32.ge_s (local.get $at) (i32.const 0))
      (then
        ;; `"postId":` + the quoted id + `,` or `}`, within the comment.
        (local.set $end (i32.add (local.get $at) (i32.add (local.get $id_len) (i32.const 11))))
        (if (i32.or
              (i32.ge_u (local.get $end) (local.get $comment_len))
              (i32.ne
                (call $find (i32.add (local.get $comment) (i32.add (local.get $at) (i32.const 9)))
                  (i32.add (local.get $id_len) (i32.const 2))
                  (i32.add (local.get $p) (i32.const 1)) (i32.add (local.get $id_len) (i32.const 2)))
                (i32.const 0)))
          (then (call $bad (i32.const 0xd100) (i32.const 46))))
        (local.set $c (i32.load8_u (i32.add (local.get $comment) (local.get $end))))
        (if (i32.and (i32.ne (local.get $c) (i32.const 0x2c)) (i32.ne (local.get $c) (i32.const 0x7d)))
          (then (call $bad (i32.const 0xd100) (i32.const 46))))
        (local.set $has_post_id (i32.const 1))))

    ;; 2. Read the post's commentCount: its JSON text, nothing (r == 0)
    ;; when the post has none, more than 32 bytes when it is no small
    ;; integer (it then waits, and the next call drops it).
    (local.set $r (call $read_member (i32.add (local.get $p) (i32.const 2)) (local.get $id_len)
      (i32.const 0xd000) (i32.const 12) (global.get $COUNT) (i32.const 32)))
    (if (i32.eq (local.get $r) (i32.const -1)) (then (return (i32.const 0))))  ;; NOT_ACCEPTED
    (if (i32.lt_s (local.get $r) (i32.const 0))
      (then (call $fail_with_result (i32.sub (i32.const 0) (local.get $r)))))
    ;; 3. commentCount + 1: the text must be 1 to 18 digits and nothing else.
    (if (i32.or (i32.eqz (local.get $r)) (i32.gt_u (local.get $r) (i32.const 18)))
      (then (call $bad (i32.const 0xd080) (i32.const 36))))
    (local.set $end (i32.const 0))
    (loop $digits
      (local.set $c (i32.load8_u (i32.add (global.get $COUNT) (local.get $end))))
      (if (i32.gt_u (i32.sub (local.get $c) (i32.const 48)) (i32.const 9))
        (then (call $bad (i32.const 0xd080) (i32.const 36))))
      (local.set $count (i64.add (i64.mul (local.get $count) (i64.const 10))
        (i64.extend_i32_u (i32.sub (local.get $c) (i32.const 48)))))
      (local.set $end (i32.add (local.get $end) (i32.const 1)))
      (br_if $digits (i32.lt_u (local.get $end) (local.get $r))))
    (local.set $len (call $itoa (i64.add (local.get $count) (i64.const 1)) (global.get $NEW_COUNT)))

    ;; 4. Replace the post with the new count (no options; the result is
    ;; not needed, so it waits with out_cap 0 and is dropped by the next
    ;; call).
    (local.set $r (call $replace_member (i32.add (local.get $p) (i32.const 2)) (local.get $id_len)
      (i32.const 0xd000) (i32.const 12) (global.get $NEW_COUNT) (local.get $len)
      (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0)))
    (if (i32.eq (local.get $r) (i32.const -1)) (then (return (i32.const 0))))
    (if (i32.lt_s (local.get $r) (i32.const 0))
      (then (call $fail_with_result (i32.sub (i32.const 0) (local.get $r)))))

    ;; 5. The comment with "postId" appended: `{...` + `,"postId":"<id>"}`,
    ;; or as it is when it has the post's id already (step 1).
    (if (local.get $has_post_id)
      (then
        (local.set $r (call $create (local.get $comment) (local.get $comment_len)
          (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0)))
        (if (i32.eq (local.get $r) (i32.const -1)) (then (return (i32.const 0))))
        (if (i32.lt_s (local.get $r) (i32.const 0))
          (then (call $fail_with_result (i32.sub (i32.const 0) (local.get $r)))))
        (return (i32.const 0))))
    (local.set $out (call $out_for (i32.add (local.get $comment_len) (i32.add (local.get $id_len) (i32.const 12)))))
    (memory.copy (local.get $out) (local.get $comment) (i32.sub (local.get $comment_len) (i32.const 1)))
    (local.set $len (i32.sub (local.get $comment_len) (i32.const 1)))
    (if (i32.gt_u (local.get $comment_len) (i32.const 2))                 ;; not `{}`
      (then
        (i32.store8 (i32.add (local.get $out) (local.get $len)) (i32.const 0x2c)) ;; `,`
        (local.set $len (i32.add (local.get $len) (i32.const 1)))))
    (memory.copy (i32.add (local.get $out) (local.get $len)) (i32.const 0xd010) (i32.const 9))
    (local.set $len (i32.add (local.get $len) (i32.const 9)))
    ;; The id with its quotes, straight from the parameters.
    (memory.copy (i32.add (local.get $out) (local.get $len))
      (i32.add (local.get $p) (i32.const 1)) (i32.add (local.get $id_len) (i32.const 2)))
    (local.set $len (i32.add (local.get $len) (i32.add (local.get $id_len) (i32.const 2))))
    (i32.store8 (i32.add (local.get $out) (local.get $len)) (i32.const 0x7d))  ;; `}`
    (local.set $len (i32.add (local.get $len) (i32.const 1)))

    ;; 6. Create it; the host generates an id when it has none.
    (local.set $r (call $create (local.get $out) (local.get $len)
      (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0)))
    (if (i32.eq (local.get $r) (i32.const -1)) (then (return (i32.const 0))))
    (if (i32.lt_s (local.get $r) (i32.const 0))
      (then (call $fail_with_result (i32.sub (i32.const 0) (local.get $r)))))
    (i32.const 0))
)
