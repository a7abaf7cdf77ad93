// Jobs instrumented with the real @sentry/node Crons API, run by tests/sentry/test_sentry_js.py:
//   node checkins.mjs DSN PREFIX
// Every monitor slug starts with PREFIX. Prints the id of the first check-in it started, as JSON after RESULT.
import * as Sentry from "@sentry/node";

const [dsn, prefix] = process.argv.slice(2);
Sentry.init({ dsn, debug: true });

const crontab = {
  schedule: { type: "crontab", value: "15 4 * * *" },
  checkinMargin: 3,
  maxRuntime: 20,
  timezone: "America/New_York",
  failureIssueThreshold: 2,
  recoveryThreshold: 2,
};
const interval = { schedule: { type: "interval", value: 30, unit: "minute" }, checkinMargin: 1 };
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// captureCheckIn with monitorConfig: a start, then its finish by the start's id
const started = Sentry.captureCheckIn({ monitorSlug: `${prefix}-captured`, status: "in_progress" }, crontab);
await sleep(200);
Sentry.captureCheckIn(
  { checkInId: started, monitorSlug: `${prefix}-captured`, status: "ok", duration: 0.2 },
  crontab,
);
// withMonitor around a job that succeeds, and one that throws
await Sentry.withMonitor(`${prefix}-wrapped`, async () => { await sleep(100); }, interval);
try {
  await Sentry.withMonitor(`${prefix}-throws`, async () => { throw new Error("sync failed"); }, interval);
} catch {
  // the job's own failure; the monitor has been told
}
await Sentry.flush(10000);
console.log("RESULT " + JSON.stringify({ started }));
