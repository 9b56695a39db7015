"""The floor: the least a streaming prompt costs on openheim's own stack (click, requests, sseclient-py),
written as anyone would with their public APIs. Benchmarks divide openheim's figures by this script's.

Run: python floor.py --url http://127.0.0.1:PORT/v1 "hi"   (an OpenAI-compatible Chat Completions server)
"""

import json
import sys

import click
import requests
import sseclient


@click.command()
@click.option("--url", required=True, help="api_base of an OpenAI-compatible server")
@click.option("--model", default="m")
@click.argument("prompt")
def main(url: str, model: str, prompt: str) -> None:
    body = {"model": model, "stream": True, "messages": [{"role": "user", "content": prompt}]}
    with requests.post(
        url + "/chat/completions", json=body, headers={"Authorization": "Bearer sk-floor"}, stream=True, timeout=120
    ) as resp:
        resp.raise_for_status()
        out = sys.stdout
        for event in sseclient.SSEClient(resp.iter_content(chunk_size=None)).events():
            if event.data == "[DONE]":
                break
            for choice in json.loads(event.data).get("choices") or ():
                text = (choice.get("delta") or {}).get("content")
                if text:
                    out.write(text)
                    out.flush()
        out.write("\n")


if __name__ == "__main__":
    main()
