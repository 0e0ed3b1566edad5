;; The Wasm ABI fuzz target's guest (tests/fuzz_targets.rs): a procedure
;; that calls one partita_v1 import with arguments and memory contents the
;; test chose, and answers the import's result.
;;
;; Its one parameter is a string of hex digits. Decoded at 0x8000 it is
;; a header, byte 0 the import's index in host_api::abi::IMPORTS order and
;; bytes 4..36 eight little-endian i32 arguments (raw: pointers, lengths,
;; capacities, fail's number), followed by the bytes the arguments point at.
;; The procedure calls the import, then sets the result as the response
;; body in decimal (0 for log, which returns nothing; fail never returns).
;; Memory: 2 pages (0x20000 bytes), fixed; 0x0100..0x8000 holds the
;; parameters, 0x8000.. the decoded bytes, 0x10000.. is free for outputs.
(module
  (import "partita_v1" "context" (func $context (param i32 i32) (result i32)))
  (import "partita_v1" "params" (func $params (param i32 i32) (result i32)))
  (import "partita_v1" "request_body" (func $request_body (param i32 i32) (result i32)))
  (import "partita_v1" "set_request_body" (func $set_request_body (param i32 i32) (result i32)))
  (import "partita_v1" "response_body" (func $response_body (param i32 i32) (result i32)))
  (import "partita_v1" "set_response_body" (func $set_response_body (param i32 i32) (result i32)))
  (import "partita_v1" "log" (func $log (param i32 i32)))
  (import "partita_v1" "read" (func $read (param i32 i32 i32 i32) (result i32)))
  (import "partita_v1" "read_feed" (func $read_feed (param i32 i32 i32 i32) (result i32)))
  (import "partita_v1" "create" (func $create (param i32 i32 i32 i32 i32 i32) (result i32)))
  (import "partita_v1" "replace" (func $replace (param i32 i32 i32 i32 i32 i32 i32 i32) (result i32)))
  (import "partita_v1" "upsert" (func $upsert (param i32 i32 i32 i32 i32 i32) (result i32)))
  (import "partita_v1" "delete" (func $delete (param i32 i32 i32 i32) (result i32)))
  (import "partita_v1" "query" (func $query (param i32 i32 i32 i32) (result i32)))
  (import "partita_v1" "take_result" (func $take_result (param i32 i32) (result i32)))
  (import "partita_v1" "fail" (func $fail (param i32 i32 i32)))
  (import "partita_v1" "read_member" (func $read_member (param i32 i32 i32 i32 i32 i32) (result i32)))
  (import "partita_v1" "replace_member"
    (func $replace_member (param i32 i32 i32 i32 i32 i32 i32 i32 i32 i32) (result i32)))

  (memory (export "memory") 2)

  ;; Argument i of the header.
  (func $a (param $i i32) (result i32)
    (i32.load (i32.add (i32.const 0x8004) (i32.shl (local.get $i) (i32.const 2)))))

  ;; The value of one hex digit.
  (func $hex (param $c i32) (result i32)
    (if (result i32) (i32.le_u (local.get $c) (i32.const 0x39))
      (then (i32.sub (local.get $c) (i32.const 0x30)))
      (else (i32.sub (i32.or (local.get $c) (i32.const 0x20)) (i32.const 0x57)))))

  ;; Decodes the hex string of the parameters (the text between the first
  ;; two quotes of `["..."]`) to 0x8000.
  (func $decode
    (local $n i32) (local $i i32) (local $o i32)
    (local.set $n (call $params (i32.const 0x100) (i32.const 0x7f00)))
    (if (i32.or (i32.lt_s (local.get $n) (i32.const 0)) (i32.gt_s (local.get $n) (i32.const 0x7f00)))
      (then (call $fail (i32.const 1) (i32.const 0) (i32.const 0))))
    (local.set $i (i32.const 0x100))
    (local.set $n (i32.add (local.get $n) (i32.const 0x100)))
    (block $found (loop $seek
      (br_if $found (i32.ge_u (local.get $i) (local.get $n)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $seek (i32.ne (i32.load8_u (i32.sub (local.get $i) (i32.const 1))) (i32.const 0x22)))))
    (local.set $o (i32.const 0x8000))
    (block $done (loop $pairs
      (br_if $done (i32.ge_u (i32.add (local.get $i) (i32.const 1)) (local.get $n)))
      (br_if $done (i32.eq (i32.load8_u (local.get $i)) (i32.const 0x22)))
      (i32.store8 (local.get $o)
        (i32.or
          (i32.shl (call $hex (i32.load8_u (local.get $i))) (i32.const 4))
          (call $hex (i32.load8_u (i32.add (local.get $i) (i32.const 1))))))
      (local.set $o (i32.add (local.get $o) (i32.const 1)))
      (local.set $i (i32.add (local.get $i) (i32.const 2)))
      (br $pairs))))

  ;; Sets `r` in decimal as the response body.
  (func $answer (param $r i32)
    (local $p i32) (local $v i64) (local $neg i32)
    (local.set $v (i64.extend_i32_s (local.get $r)))
    (local.set $neg (i64.lt_s (local.get $v) (i64.const 0)))
    (if (local.get $neg) (then (local.set $v (i64.sub (i64.const 0) (local.get $v)))))
    (local.set $p (i32.const 0x40))
    (loop $digits
      (local.set $p (i32.sub (local.get $p) (i32.const 1)))
      (i32.store8 (local.get $p)
        (i32.add (i32.const 0x30) (i32.wrap_i64 (i64.rem_u (local.get $v) (i64.const 10)))))
      (local.set $v (i64.div_u (local.get $v) (i64.const 10)))
      (br_if $digits (i64.ne (local.get $v) (i64.const 0))))
    (if (local.get $neg)
      (then
        (local.set $p (i32.sub (local.get $p) (i32.const 1)))
        (i32.store8 (local.get $p) (i32.const 0x2d))))
    (drop (call $set_response_body (local.get $p) (i32.sub (i32.const 0x40) (local.get $p)))))

  (func (export "partita_procedure") (result i32)
    (local $r i32)
    (call $decode)
    (block $end
    (block $replace_member (block $read_member
    (block $fail (block $take (block $query (block $delete (block $upsert (block $replace
    (block $create (block $read_feed (block $read (block $log (block $set_response
    (block $response (block $set_request (block $request (block $params (block $context
      (br_table $context $params $request $set_request $response $set_response $log $read
        $read_feed $create $replace $upsert $delete $query $take $fail $read_member
        $replace_member $end
        (i32.load8_u (i32.const 0x8000))))
    (local.set $r (call $context (call $a (i32.const 0)) (call $a (i32.const 1)))) (br $end))
    (local.set $r (call $params (call $a (i32.const 0)) (call $a (i32.const 1)))) (br $end))
    (local.set $r (call $request_body (call $a (i32.const 0)) (call $a (i32.const 1)))) (br $end))
    (local.set $r (call $set_request_body (call $a (i32.const 0)) (call $a (i32.const 1)))) (br $end))
    (local.set $r (call $response_body (call $a (i32.const 0)) (call $a (i32.const 1)))) (br $end))
    (local.set $r (call $set_response_body (call $a (i32.const 0)) (call $a (i32.const 1)))) (br $end))
    (call $log (call $a (i32.const 0)) (call $a (i32.const 1))) (br $end))
    (local.set $r (call $read (call $a (i32.const 0)) (call $a (i32.const 1))
      (call $a (i32.const 2)) (call $a (i32.const 3)))) (br $end))
    (local.set $r (call $read_feed (call $a (i32.const 0)) (call $a (i32.const 1))
      (call $a (i32.const 2)) (call $a (i32.const 3)))) (br $end))
    (local.set $r (call $create (call $a (i32.const 0)) (call $a (i32.const 1))
      (call $a (i32.const 2)) (call $a (i32.const 3))
      (call $a (i32.const 4)) (call $a (i32.const 5)))) (br $end))
    (local.set $r (call $replace (call $a (i32.const 0)) (call $a (i32.const 1))
      (call $a (i32.const 2)) (call $a (i32.const 3))
      (call $a (i32.const 4)) (call $a (i32.const 5))
      (call $a (i32.const 6)) (call $a (i32.const 7)))) (br $end))
    (local.set $r (call $upsert (call $a (i32.const 0)) (call $a (i32.const 1))
      (call $a (i32.const 2)) (call $a (i32.const 3))
      (call $a (i32.const 4)) (call $a (i32.const 5)))) (br $end))
    (local.set $r (call $delete (call $a (i32.const 0)) (call $a (i32.const 1))
      (call $a (i32.const 2)) (call $a (i32.const 3)))) (br $end))
    (local.set $r (call $query (call $a (i32.const 0)) (call $a (i32.const 1))
      (call $a (i32.const 2)) (call $a (i32.const 3)))) (br $end))
    (local.set $r (call $take_result (call $a (i32.const 0)) (call $a (i32.const 1)))) (br $end))
    (call $fail (call $a (i32.const 0)) (call $a (i32.const 1)) (call $a (i32.const 2))) (br $end))
    (local.set $r (call $read_member (call $a (i32.const 0)) (call $a (i32.const 1))
      (call $a (i32.const 2)) (call $a (i32.const 3))
      (call $a (i32.const 4)) (call $a (i32.const 5)))) (br $end))
    (local.set $r (call $replace_member (call $a (i32.const 0)) (call $a (i32.const 1))
      (call $a (i32.const 2)) (call $a (i32.const 3))
      (call $a (i32.const 4)) (call $a (i32.const 5))
      (call $a (i32.const 6)) (call $a (i32.const 7))
      (call $a (i32.const 8)) (call $a (i32.const 9)))))
    (call $answer (local.get $r))
    (i32.const 0)))
