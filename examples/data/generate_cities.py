#!/usr/bin/env python3
"""Writes cities.csv: 10,000 made-up cities (deterministic), in the shape of the world-cities
file seed 003's benchmark fed its flow from. Some fields are quoted (commas) and AccentCity is
UTF-8, so the CSV reader's quoting and encoding are exercised. Run: python3 generate_cities.py"""
import csv
import random

rng = random.Random(3)
countries = ["fr", "de", "es", "it", "pt", "pl", "se", "no", "fi", "nl", "be", "at", "ch", "cz", "gr", "ie"]
syllables = ["ba", "lo", "mi", "ra", "ne", "to", "vi", "sa", "de", "ko", "lu", "pe", "ri", "an", "el", "or"]
accents = {"a": "á", "e": "é", "o": "ö", "u": "ü", "i": "í"}

with open("cities.csv", "w", newline="", encoding="utf-8") as f:
    w = csv.writer(f, lineterminator="\n")
    w.writerow(["Country", "City", "AccentCity", "Region", "Population", "Latitude", "Longitude"])
    for i in range(10_000):
        city = "".join(rng.choice(syllables) for _ in range(rng.randint(2, 4)))
        accent = "".join(accents.get(c, c) if rng.random() < 0.15 else c for c in city).title()
        if i % 10 == 0:
            accent += ", Saint-" + rng.choice(syllables).title()  # a comma: the field is quoted
        w.writerow([
            rng.choice(countries),
            f"{city}{i}",
            accent,
            f"{rng.randint(1, 99):02d}",
            rng.randint(500, 3_000_000),
            f"{rng.uniform(-60, 70):.5f}",
            f"{rng.uniform(-180, 180):.5f}",
        ])
