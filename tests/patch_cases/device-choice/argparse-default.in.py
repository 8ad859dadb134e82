import argparse

parser = argparse.ArgumentParser()
parser.add_argument("--device", default="cuda")  # FIX: device-choice
