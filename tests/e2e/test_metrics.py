"""/metrics after a small mixed load: every metric of TGI's latest list (spec §3.2) is served and
the counters and histograms that the load should move did move; the gauges the Gateway API
Inference Extension reads are there too."""

import threading
import time

import pytest

from conftest import gen_body, parse_metrics, vllm_series

# Spec §3.2, every name TGI's router exports. Two never show up after a healthy load:
# tgi_batch_inference_failure is recorded only when a forward fails (in TGI too), and
# tgi_batch_max_total_tokens is set before TGI installs its recorder, so TGI never exports it.
TGI_METRICS = {
    "tgi_request_count": "counter",
    "tgi_request_success": "counter",
    "tgi_request_failure": "counter",
    "tgi_request_duration": "histogram",
    "tgi_request_validation_duration": "histogram",
    "tgi_request_queue_duration": "histogram",
    "tgi_request_inference_duration": "histogram",
    "tgi_request_mean_time_per_token_duration": "histogram",
    "tgi_request_generated_tokens": "histogram",
    "tgi_request_input_length": "histogram",
    "tgi_request_max_new_tokens": "histogram",
    "tgi_request_skipped_tokens": "summary",
    "tgi_queue_size": "gauge",
    "tgi_batch_current_size": "gauge",
    "tgi_batch_current_max_tokens": "gauge",
    "tgi_batch_next_size": "histogram",
    "tgi_batch_concat": "counter",
    "tgi_batch_inference_count": "counter",
    "tgi_batch_inference_success": "counter",
    "tgi_batch_inference_duration": "histogram",
    "tgi_batch_forward_duration": "histogram",
    "tgi_batch_decode_duration": "histogram",
    "tgi_batch_filter_duration": "histogram",
    "tgi_batch_concat_duration": "histogram",
}
GATEWAY_GAUGES = ("vllm:num_requests_waiting", "vllm:num_requests_running",
                  "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")  # fmt: skip

# A prompt the default model keeps continuing (no early EOS), so the stream outlives the others.
COUNTING = "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,"


def types(text: str) -> dict:
    return dict(line.split()[2:4] for line in text.splitlines() if line.startswith("# TYPE "))


def idle_metrics(server) -> tuple:
    """Scrape once the engine is idle: the engine records a step before it shows the step done."""
    deadline = time.monotonic() + 5
    while True:
        text = server.get("/metrics").text
        m = parse_metrics(text)
        idle = m.get("tgi_batch_current_size", 0) == 0 and m.get("tgi_queue_size", 0) == 0
        if idle or time.monotonic() > deadline:
            return text, m
        time.sleep(0.02)


def mixed_load(server):
    """A stream that is running while /generate, a chat and a refused request arrive."""
    stream = server.post("/generate_stream", gen_body(COUNTING, max_new_tokens=48), stream=True)
    assert stream.status_code == 200
    lines = stream.iter_lines()
    assert next(line for line in lines if line).startswith(b"data:")  # it is running now
    done = []

    def generate():
        r = server.post("/generate", gen_body("Hello", max_new_tokens=4))
        done.append(r.status_code)

    threads = [threading.Thread(target=generate) for _ in range(2)]
    for t in threads:
        t.start()
    chat = server.post("/v1/chat/completions",
                       {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4})  # fmt: skip
    refused = server.post("/generate", gen_body("Hi", temperature=0.0))
    for t in threads:
        t.join()
    rest = [line for line in lines if line]
    assert rest and b'"generated_text":"' in rest[-1], rest[-1:]
    assert chat.status_code == 200 and refused.status_code == 422 and done == [200, 200]


def delta(after: dict, before: dict, key: str) -> float:
    return after.get(key, 0) - before.get(key, 0)


def test_every_tgi_metric_is_served_and_moves_under_a_mixed_load(server):
    _, before = idle_metrics(server)
    mixed_load(server)
    text, after = idle_metrics(server)

    served = types(text)
    for name, kind in TGI_METRICS.items():
        assert served.get(name) == kind, (name, served.get(name))
    for name in GATEWAY_GAUGES:
        assert served.get(name) == "gauge", name
        # With vLLM's model_name label (its dashboards select on it): the served model id.
        assert vllm_series(name) in after, (name, [k for k in after if k.startswith("vllm:")])
    assert after[vllm_series("vllm:num_requests_running")] == 0
    assert after[vllm_series("vllm:num_requests_waiting")] == 0

    # Request family: 2 /generate + 1 stream + the chat (counted twice, once by its route and
    # once by its generation, as TGI does) + the refused one.
    assert delta(after, before, "tgi_request_count") >= 6
    assert delta(after, before, "tgi_request_success") >= 4
    assert delta(after, before, 'tgi_request_failure{err="validation"}') >= 1
    for h in ("tgi_request_duration", "tgi_request_validation_duration",
              "tgi_request_queue_duration", "tgi_request_inference_duration",
              "tgi_request_mean_time_per_token_duration", "tgi_request_generated_tokens",
              "tgi_request_input_length", "tgi_request_max_new_tokens"):  # fmt: skip
        assert delta(after, before, f"{h}_count") >= 4, h

    # Batch family: a prefill (new batch) and decodes, with and without the stream running.
    for method in ('method="prefill"', 'method="decode"'):
        count = delta(after, before, f"tgi_batch_inference_count{{{method}}}")
        assert count >= 1, method
        assert delta(after, before, f"tgi_batch_inference_success{{{method}}}") == count, method
        for h in ("tgi_batch_inference_duration", "tgi_batch_forward_duration",
                  "tgi_batch_decode_duration", "tgi_batch_filter_duration"):  # fmt: skip
            assert delta(after, before, f"{h}_count{{{method}}}") == count, (h, method)
            assert after[f'{h}_bucket{{{method},le="+Inf"}}'] == after[f"{h}_count{{{method}}}"]
        assert f'tgi_batch_inference_failure{{{method}}}' not in after
    # The stream generated 48 tokens in decode steps; the rest joined it while it ran.
    assert delta(after, before, 'tgi_batch_inference_count{method="decode"}') >= 40
    assert delta(after, before, 'tgi_batch_concat{reason="chunking"}') >= 1
    assert delta(after, before, 'tgi_batch_concat_duration_count{method="decode"}') >= 1
    assert delta(after, before, "tgi_batch_next_size_count") >= 2
    # One (zero) skipped-token observation per generated token.
    assert delta(after, before, "tgi_request_skipped_tokens_count") >= 48 + 2 * 1
    assert after['tgi_request_skipped_tokens{quantile="1"}'] == 0
    assert after["tgi_batch_current_size"] == 0 and after["tgi_batch_current_max_tokens"] == 0


@pytest.mark.parametrize("path, body", [
    ("/generate", gen_body(COUNTING, max_new_tokens=8)),
    ("/v1/completions", {"prompt": COUNTING, "max_tokens": 8}),
])  # fmt: skip
def test_a_non_streamed_request_reports_its_inference_time(server, path, body):
    """Inference runs from the first token to the end, so it is not zero without a stream."""
    _, before = idle_metrics(server)
    r = server.post(path, body)
    assert r.status_code == 200, r.text
    _, after = idle_metrics(server)
    assert delta(after, before, "tgi_request_inference_duration_count") == 1
    assert delta(after, before, "tgi_request_inference_duration_sum") > 0
    assert delta(after, before, "tgi_request_mean_time_per_token_duration_sum") > 0


def test_chat_counts_twice_and_chat_tokenize_once(server):
    _, before = idle_metrics(server)
    chat = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}
    assert server.post("/v1/chat/completions", chat).status_code == 200
    assert server.post("/chat_tokenize", chat).status_code == 200
    _, after = idle_metrics(server)
    assert delta(after, before, "tgi_request_count") == 3
