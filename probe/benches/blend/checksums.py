"""The checksums of the published BLEnD files (nlee0212/BLEnD at a fixed commit, under `data/`).

Each file downloaded from the source is checked against its own digest before it is cached;
`DATA_SHA256` folds the 48 into one value, the default of `bench.sha256`, so a local copy is
checked with one config value too.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

COMMIT = "24e7d732c082c224b3bc9c7dc3b884fe83fb8cc8"
SOURCE_URL = f"https://raw.githubusercontent.com/nlee0212/BLEnD/{COMMIT}/data"

FILE_SHA256: dict[str, str] = {
    "annotations/Algeria_data.json": "96bfafe589edbae426261bca3b5f7afff1a01f4787430aeecb47e56dd68064bf",
    "annotations/Assam_data.json": "6d28e046b8230a9f3e4720a3ffbfb15c44fca07ecdd535c7f215a2cb9a4df00f",
    "annotations/Azerbaijan_data.json": "4d5d93b0179f457ee0364bdc5403ba1d595cfa755f76878425f0833835b1ea18",
    "annotations/China_data.json": "43321ad7e228d6f8d28d98a3175f258755ec3e0a7805eb1a6550e609ccdc8b0d",
    "annotations/Ethiopia_data.json": "71ddd5feef8483ff9dc3769f51e03b2ae14df5b125f9cd296c8d96fd215149a0",
    "annotations/Greece_data.json": "1be01ca43db4a46717e691e4664e2fe1dafd240427df65ad4e6e9405a73fc5da",
    "annotations/Indonesia_data.json": "a2a7674934e7678ce14334d4667b051443335a504e06e050e40495fb98d2a0c0",
    "annotations/Iran_data.json": "516d80b0fe05a464f25f734c5c3683da2362988a710c8fabfea29eefbd95fa72",
    "annotations/Mexico_data.json": "ab36bf638bae6e959e54c456328a167066bfbb96e48ca42d847a386477b677a4",
    "annotations/North_Korea_data.json": "a97e0290461d5fca65018716d01b648cfaf99344d7a50db735767d821cc28dad",
    "annotations/Northern_Nigeria_data.json": "0af2da94867902824c4ac745fd1b3d2f1d51a72015b68103800dbdc82104c776",
    "annotations/South_Korea_data.json": "b04e620e2731183f57af045c3c90cf2aadd42699fd642fc2d3448d89d3a4c90b",
    "annotations/Spain_data.json": "92406493cac03364e1daabcf7c54b80f232884ccf8cb708200aff5322a354472",
    "annotations/UK_data.json": "0cb8ea116988e574d4161bcde51013d2896e5d412f593dc4ad80afe9c8ba01c6",
    "annotations/US_data.json": "a9da7f3ad4f4c90b7460e1e66be63d1910212fa35678f92778b81b279472ed6a",
    "annotations/West_Java_data.json": "7d34d20b711b99da57a6d0351d381f7a7fa79d69f49abd64829b27aeebde0868",
    "questions/Algeria_questions.csv": "5cc3833e0942cfcab6ce86e953931a6694019347d980d21678ff7bccdd81c319",
    "questions/Assam_questions.csv": "293d5de6834c8bd20c2d8967a209eab16cdc8c4252d11108adf1e8bb409c0de6",
    "questions/Azerbaijan_questions.csv": "5f5290cea8d5a7dac8fa38c3672e88fe57ed051f887a34ecb7a84a4105068787",
    "questions/China_questions.csv": "bd11d07d43765d6d6a740ed6eeca741738e42b3175ada4a3cfe45e699b1c77a3",
    "questions/Ethiopia_questions.csv": "6fa66b82d4871c65242201fed80a8dee08498dc617eed8053d3ae29919e478ec",
    "questions/Greece_questions.csv": "14a84d6c9796e10b2a1a25368b63027811dcf60894f55fe5ce977e9485471b58",
    "questions/Indonesia_questions.csv": "732c35bcd00f376c92af6feae1c493d986a465e197c53b11f7de1fe26d1844cf",
    "questions/Iran_questions.csv": "c9b4abd774efd0ffb6fd4baa936bdf6d359a140e63373e345d7ab8629cfc3311",
    "questions/Mexico_questions.csv": "b0fb1780671d8f79599cd6efdb27dd624532f498f110a4efe3ad9ff88bb5d876",
    "questions/North_Korea_questions.csv": "c284e66d233dc41ddab62f9c51f139c1e812c25a96c4754d08fe733ddee34572",
    "questions/Northern_Nigeria_questions.csv": "6065769cf962c0f90c52467abfb5e2940f9aaa67842480b534e27eebe652e673",
    "questions/South_Korea_questions.csv": "0d1df0675d1f9be06a9da9b6016de8c6be63a42c93917c72407704f23a5fb757",
    "questions/Spain_questions.csv": "98826017d18e646b4eb21b321f583b79b17d0d6e1bb316e389fd0151ad3efe6c",
    "questions/UK_questions.csv": "86aab8359fb4c4bbb2fb2e9edb34b7bb4341d2835a69eaff0131348ce6042495",
    "questions/US_questions.csv": "d60b5643974af6084a5db9d727f01db21c487c1231bc21e07315900a43eff8e0",
    "questions/West_Java_questions.csv": "e4df5d485ef8fa12a8290f706705a0646bfc2f4da8a17a88a9087f226f74f4c0",
    "prompts/Algeria_prompts.csv": "66277bd197eaee2a795c140d095b0896a473741fc15ca05e911add244b394b68",
    "prompts/Assam_prompts.csv": "7ddd6801de36ebb40ab561de4ebce07f76c5c90321e44930f5ab27f8b766c256",
    "prompts/Azerbaijan_prompts.csv": "3cac25e9d402abbd75f08dd10ed65a8c9b22299da7840371b17939b453e1171d",
    "prompts/China_prompts.csv": "a1a277578ebbff1db2322fbc98bb85ccb7eb3c73651a6214b4da3e9330a8a4f7",
    "prompts/Ethiopia_prompts.csv": "c57f16ff29131670ba1c7d2d5b3b23c302782858ecf8d297eb54b85d4a421540",
    "prompts/Greece_prompts.csv": "32681c4d5927d70361bf71b0010c6917d19cbd849221237a9c57aeb6835543a7",
    "prompts/Indonesia_prompts.csv": "ffca0c4379fc0f92cd41d70b035aefce646f4f2e3489e4cf95cc40b8881a6afe",
    "prompts/Iran_prompts.csv": "73d335b22b54ec41c1a147a9e3da563d6cd6c5d7cf59814719b7e2a5083d46d1",
    "prompts/Mexico_prompts.csv": "48e549f29eef5dea5400f3517fcbdcccb73cb830b1c7f27110b4ba80ffddd529",
    "prompts/North_Korea_prompts.csv": "1e92571c8bc87959abeec96279baa2d5ff2c06256ea85a63184314f70f422b80",
    "prompts/Northern_Nigeria_prompts.csv": "5250facd842e4518638cf60494028960b88f560a0443a682e56df51e4c1abef9",
    "prompts/South_Korea_prompts.csv": "a3f7e7981e15c41ebd2a75f705c0aeff3e556452f6c7523fae4f46847adc33a0",
    "prompts/Spain_prompts.csv": "a445ab118fe5042b77ee3fd990a46e1d641b7ffdc23251a370366a911b2c5f3d",
    "prompts/UK_prompts.csv": "c43dbbb3946ded4ebc46f51e9fa8dc3bdf16ca0c05cedc1617495a107317623c",
    "prompts/US_prompts.csv": "8ef180e55a1e2eae507788b25e31ca9bc678a3d3cdc9c0c9eed95edcad7f23fb",
    "prompts/West_Java_prompts.csv": "f81be5f2734e354e12ba58c4c4810ba884edcac3c2f3fbd82c61384360b503a6",
}
"""sha256 of each published file, by its path under `data/`."""


def combined_sha256(digests: Mapping[str, str]) -> str:
    """One digest of a set of files: sha256 over `<path> <sha256>` lines in path order."""
    lines = "".join(f"{path} {digests[path]}\n" for path in sorted(digests))
    return hashlib.sha256(lines.encode()).hexdigest()


DATA_SHA256 = combined_sha256(FILE_SHA256)
"""The published data set's combined digest (`combined_sha256` of `FILE_SHA256`)."""
