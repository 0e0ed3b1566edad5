// hostile: 300,000 `await` prefixes in an async function
// upload: 400
// isolated: -
// in-process: -
async function f() { var x = {{REPEAT:300000:await }}1; }
