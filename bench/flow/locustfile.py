"""The 5-request user flow of issue #6 (seed 003) for Locust, run by bench/flow/run.sh:

    locust -f locustfile.py --headless -u 20 -r 20 -t 20s -H http://127.0.0.1:PORT --only-summary

FLOW_CSV (the cities CSV, header Country,City,AccentCity,...) and FLOW_UPLOAD (the JSON file of
step 4) come from the environment. Rows are taken in order, shared by all users, and start over at
the end of the file. FastHttpUser (geventhttpclient) is Locust's faster client; each request is
checked (status 200, the extracted value present) with catch_response.
"""

import csv
import itertools
import os

from locust import FastHttpUser, task

with open(os.environ["FLOW_CSV"], newline="", encoding="utf-8") as f:
    ROWS = list(csv.DictReader(f))
NEXT_ROW = itertools.cycle(ROWS)
with open(os.environ["FLOW_UPLOAD"], "rb") as f:
    UPLOAD = f.read()


def extract(resp, *path):
    """The value at `path` in the JSON body; marks the request failed when it is missing."""
    try:
        v = resp.json()
        for p in path:
            v = v[p]
    except Exception as e:  # noqa: BLE001 - any parse or lookup error fails the request
        resp.failure(f"extract {'.'.join(path)}: {e!r}")
        return None
    return v


class Flow(FastHttpUser):
    # closed loop, no think time
    def wait_time(self):
        return 0

    @task
    def flow(self):
        row = next(NEXT_ROW)
        with self.client.get("/get", headers={"authorization": "bearer jwt"}, name="echoGet", catch_response=True) as r:
            self.auth_header = extract(r, "headers", "Authorization")
            self.host_header = extract(r, "headers", "Host")
        with self.client.post(
            "/post", data={"key23": row["Country"], "key24": row["City"]}, name="echoPostWithUrlEncoded", catch_response=True
        ) as r:
            self.country = extract(r, "form", "key23")
            self.city = extract(r, "form", "key24")
        with self.client.post(
            "/post", files={"key1": (None, row["AccentCity"])}, name="echoPostFormData", catch_response=True
        ) as r:
            self.keyname = extract(r, "form", "key1")
        with self.client.post(
            "/post",
            data={"key21": "key22"},
            files={"file": ("upload.json", UPLOAD, "application/json")},
            name="echoPostFormDataWithFile",
            catch_response=True,
        ) as r:
            self.file_content = extract(r, "files", "file")
        with self.client.post("/post", json={"test": "test"}, name="echoPostJSON", catch_response=True) as r:
            self.test = extract(r, "json", "test")
