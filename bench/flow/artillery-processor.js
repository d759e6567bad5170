// Helpers for artillery.yml (bench/flow): the loop condition and a new CSV row per iteration.
'use strict';

const durationMs = Number(process.env.FLOW_DURATION || 20) * 1000;
let deadline = null; // set by the first iteration of the first VU, when the load starts
let next = 0;

// whileTrue: keep looping until the run's duration has passed.
function keepGoing(context, done) {
  return done(Date.now() < deadline);
}

// The next row of the CSV (loaded whole as `cities`), shared by the VUs of this worker.
function nextRow(context, events, done) {
  if (deadline === null) deadline = Date.now() + durationMs;
  const rows = context.vars.cities;
  const row = rows[next++ % rows.length];
  context.vars.Country = row.Country;
  context.vars.City = row.City;
  context.vars.AccentCity = row.AccentCity;
  return done();
}

module.exports = { keepGoing, nextRow };
