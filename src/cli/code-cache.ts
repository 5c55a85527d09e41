/**
 * What the launcher (bin/brokered-shell.js) needs to know to keep a useful V8 code cache.
 * V8 puts in a cache only the functions compiled before it was made, and a cache it accepts
 * is never rewritten: one made by a run whose broker answered no request lacks the request
 * path, and every later run that makes requests compiles it again (≈ 30 ms here). The
 * launcher asks this after `main` and writes a deeper cache once when the answer is yes.
 */
let answered = false;

/** Called by commands that run a broker, once it has answered a request. */
export function noteBrokerRequest(): void {
  answered = true;
}

/** Whether this process's broker answered at least one request. */
export function brokerAnsweredRequests(): boolean {
  return answered;
}
