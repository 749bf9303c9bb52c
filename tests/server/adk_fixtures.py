"""Responses of google-adk 2.13's ``api_server``, recorded for ``test_adk_compat.py``.

Recorded with ``get_fast_api_app(agents_dir=..., web=False, session_service_uri="memory://",
artifact_service_uri="memory://", use_local_storage=False)`` serving one app, ``myapp``: an
``LlmAgent`` named ``weather`` whose model first calls ``get_weather(city="Paris")`` (the tool
sets state ``x = 1`` and returns ``{"weather": "sunny", "city": "Paris"}``), then answers
"It is sunny." (streamed as "It is " + "sunny." when asked to stream). The requests, in order,
are those of ``test_adk_compat.py``; ``run_sse`` holds the parsed ``data:`` frames.
"""

from __future__ import annotations

from typing import Any

ADK_RESPONSES: dict[str, Any] = {
    "health": {"status": 200, "body": {"status": "ok"}},
    "list_apps": {"status": 200, "body": ["myapp"]},
    "create": {
        "status": 200,
        "body": {
            "id": "s1",
            "appName": "myapp",
            "userId": "u1",
            "state": {"k": 1, "user:p": 2},
            "events": [],
            "lastUpdateTime": 1795425372.7167356,
        },
    },
    "create_duplicate": {"status": 409, "body": {"detail": "Session already exists: s1"}},
    "get": {
        "status": 200,
        "body": {
            "id": "s1",
            "appName": "myapp",
            "userId": "u1",
            "state": {"k": 1, "user:p": 2},
            "events": [],
            "lastUpdateTime": 1795425372.7167356,
        },
    },
    "list": {
        "status": 200,
        "body": [
            {
                "id": "s1",
                "appName": "myapp",
                "userId": "u1",
                "state": {"k": 1, "user:p": 2},
                "events": [],
                "lastUpdateTime": 1795425372.7167356,
            }
        ],
    },
    "get_missing": {"status": 404, "body": {"detail": "Session not found"}},
    "patch": {
        "status": 200,
        "body": {
            "id": "s1",
            "appName": "myapp",
            "userId": "u1",
            "state": {"k": 1, "user:p": 2, "z": 9},
            "events": [
                {
                    "invocationId": "p-fb2aff80-1a5c-4b2b-a5e0-aa2b373e863f",
                    "author": "user",
                    "actions": {
                        "stateDelta": {"z": 9},
                        "artifactDelta": {},
                        "requestedAuthConfigs": {},
                        "requestedToolConfirmations": {},
                    },
                    "nodeInfo": {"path": ""},
                    "id": "3d711a97-096e-4975-b953-53160a5fc685",
                    "timestamp": 1795425372.7291405,
                }
            ],
            "lastUpdateTime": 1795425372.7291405,
        },
    },
    "run": {
        "status": 200,
        "body": [
            {
                "content": {
                    "parts": [
                        {
                            "functionCall": {
                                "id": "adk-2037d8fa-3e43-42f7-84ab-a9fac4620862",
                                "args": {"city": "Paris"},
                                "name": "get_weather",
                            }
                        }
                    ],
                    "role": "model",
                },
                "invocationId": "e-69e98278-8c8c-4155-93f4-89479b411f93",
                "author": "weather",
                "actions": {
                    "stateDelta": {},
                    "artifactDelta": {},
                    "requestedAuthConfigs": {},
                    "requestedToolConfirmations": {},
                },
                "nodeInfo": {"path": "weather@1"},
                "longRunningToolIds": [],
                "id": "7a849c90-582d-4c2f-9c94-8ffb17f105ab",
                "timestamp": 1795425372.9945762,
            },
            {
                "content": {
                    "parts": [
                        {
                            "functionResponse": {
                                "id": "adk-2037d8fa-3e43-42f7-84ab-a9fac4620862",
                                "name": "get_weather",
                                "response": {"weather": "sunny", "city": "Paris"},
                            }
                        }
                    ],
                    "role": "user",
                },
                "invocationId": "e-69e98278-8c8c-4155-93f4-89479b411f93",
                "author": "weather",
                "actions": {
                    "stateDelta": {"x": 1},
                    "artifactDelta": {},
                    "requestedAuthConfigs": {},
                    "requestedToolConfirmations": {},
                },
                "nodeInfo": {"path": "weather@1"},
                "id": "a7f81580-e851-492b-b852-de6ce578714f",
                "timestamp": 1795425372.9991763,
            },
            {
                "content": {"parts": [{"text": "It is sunny."}], "role": "model"},
                "invocationId": "e-69e98278-8c8c-4155-93f4-89479b411f93",
                "author": "weather",
                "actions": {
                    "stateDelta": {},
                    "artifactDelta": {},
                    "requestedAuthConfigs": {},
                    "requestedToolConfirmations": {},
                },
                "nodeInfo": {"path": "weather@1"},
                "id": "40664bc1-cd8f-4ca4-9d96-0f90901a20fa",
                "timestamp": 1795425373.0006485,
            },
        ],
    },
    "run_sse": {
        "status": 200,
        "data": [
            {
                "content": {
                    "parts": [
                        {
                            "functionCall": {
                                "id": "adk-3ec8ec7d-64e9-4dfa-a85f-96d749e8e3cc",
                                "args": {"city": "Paris"},
                                "name": "get_weather",
                            }
                        }
                    ],
                    "role": "model",
                },
                "invocationId": "e-f4ec8a3d-ea7a-4891-936a-f16bb9c8d047",
                "author": "weather",
                "actions": {
                    "stateDelta": {},
                    "artifactDelta": {},
                    "requestedAuthConfigs": {},
                    "requestedToolConfirmations": {},
                },
                "nodeInfo": {"path": "weather@1"},
                "longRunningToolIds": [],
                "id": "451086ed-1f6f-4ec8-91b8-1543e3dae3e9",
                "timestamp": 1795425373.2540002,
            },
            {
                "content": {
                    "parts": [
                        {
                            "functionResponse": {
                                "id": "adk-3ec8ec7d-64e9-4dfa-a85f-96d749e8e3cc",
                                "name": "get_weather",
                                "response": {"weather": "sunny", "city": "Paris"},
                            }
                        }
                    ],
                    "role": "user",
                },
                "invocationId": "e-f4ec8a3d-ea7a-4891-936a-f16bb9c8d047",
                "author": "weather",
                "actions": {
                    "stateDelta": {"x": 1},
                    "artifactDelta": {},
                    "requestedAuthConfigs": {},
                    "requestedToolConfirmations": {},
                },
                "nodeInfo": {"path": "weather@1"},
                "id": "60065b15-8857-476e-b6b3-a4e8cb1e1d08",
                "timestamp": 1795425373.2559764,
            },
            {
                "content": {"parts": [{"text": "It is "}], "role": "model"},
                "partial": True,
                "invocationId": "e-f4ec8a3d-ea7a-4891-936a-f16bb9c8d047",
                "author": "weather",
                "actions": {
                    "stateDelta": {},
                    "artifactDelta": {},
                    "requestedAuthConfigs": {},
                    "requestedToolConfirmations": {},
                },
                "nodeInfo": {"path": "weather@1"},
                "id": "2e2a90d7-3075-4cad-8b8c-f55f7566f8f3",
                "timestamp": 1795425373.2587438,
            },
            {
                "content": {"parts": [{"text": "sunny."}], "role": "model"},
                "partial": True,
                "invocationId": "e-f4ec8a3d-ea7a-4891-936a-f16bb9c8d047",
                "author": "weather",
                "actions": {
                    "stateDelta": {},
                    "artifactDelta": {},
                    "requestedAuthConfigs": {},
                    "requestedToolConfirmations": {},
                },
                "nodeInfo": {"path": "weather@1"},
                "id": "2e2a90d7-3075-4cad-8b8c-f55f7566f8f3",
                "timestamp": 1795425373.2593126,
            },
            {
                "content": {"parts": [{"text": "It is sunny."}], "role": "model"},
                "invocationId": "e-f4ec8a3d-ea7a-4891-936a-f16bb9c8d047",
                "author": "weather",
                "actions": {
                    "stateDelta": {},
                    "artifactDelta": {},
                    "requestedAuthConfigs": {},
                    "requestedToolConfirmations": {},
                },
                "nodeInfo": {"path": "weather@1"},
                "id": "2e2a90d7-3075-4cad-8b8c-f55f7566f8f3",
                "timestamp": 1795425373.259473,
            },
        ],
    },
    "get_after_runs": {
        "status": 200,
        "body": {
            "id": "s1",
            "appName": "myapp",
            "userId": "u1",
            "state": {"k": 1, "z": 9, "from_client": 1, "x": 1, "user:p": 2},
            "events": [
                {
                    "invocationId": "p-fb2aff80-1a5c-4b2b-a5e0-aa2b373e863f",
                    "author": "user",
                    "actions": {
                        "stateDelta": {"z": 9},
                        "artifactDelta": {},
                        "requestedAuthConfigs": {},
                        "requestedToolConfirmations": {},
                    },
                    "nodeInfo": {"path": ""},
                    "id": "3d711a97-096e-4975-b953-53160a5fc685",
                    "timestamp": 1795425372.7291405,
                },
                {
                    "content": {"parts": [{"text": "hi"}], "role": "user"},
                    "invocationId": "e-69e98278-8c8c-4155-93f4-89479b411f93",
                    "author": "user",
                    "actions": {
                        "stateDelta": {"from_client": 1},
                        "artifactDelta": {},
                        "requestedAuthConfigs": {},
                        "requestedToolConfirmations": {},
                    },
                    "nodeInfo": {"path": ""},
                    "id": "a601ad96-6115-4b8b-8388-98a5c6b69fd2",
                    "timestamp": 1795425372.8951705,
                },
                {
                    "content": {
                        "parts": [
                            {
                                "functionCall": {
                                    "id": "adk-2037d8fa-3e43-42f7-84ab-a9fac4620862",
                                    "args": {"city": "Paris"},
                                    "name": "get_weather",
                                }
                            }
                        ],
                        "role": "model",
                    },
                    "invocationId": "e-69e98278-8c8c-4155-93f4-89479b411f93",
                    "author": "weather",
                    "actions": {
                        "stateDelta": {},
                        "artifactDelta": {},
                        "requestedAuthConfigs": {},
                        "requestedToolConfirmations": {},
                    },
                    "nodeInfo": {"path": "weather@1"},
                    "longRunningToolIds": [],
                    "id": "7a849c90-582d-4c2f-9c94-8ffb17f105ab",
                    "timestamp": 1795425372.9945762,
                },
                {
                    "content": {
                        "parts": [
                            {
                                "functionResponse": {
                                    "id": "adk-2037d8fa-3e43-42f7-84ab-a9fac4620862",
                                    "name": "get_weather",
                                    "response": {"weather": "sunny", "city": "Paris"},
                                }
                            }
                        ],
                        "role": "user",
                    },
                    "invocationId": "e-69e98278-8c8c-4155-93f4-89479b411f93",
                    "author": "weather",
                    "actions": {
                        "stateDelta": {"x": 1},
                        "artifactDelta": {},
                        "requestedAuthConfigs": {},
                        "requestedToolConfirmations": {},
                    },
                    "nodeInfo": {"path": "weather@1"},
                    "id": "a7f81580-e851-492b-b852-de6ce578714f",
                    "timestamp": 1795425372.9991763,
                },
                {
                    "content": {"parts": [{"text": "It is sunny."}], "role": "model"},
                    "invocationId": "e-69e98278-8c8c-4155-93f4-89479b411f93",
                    "author": "weather",
                    "actions": {
                        "stateDelta": {},
                        "artifactDelta": {},
                        "requestedAuthConfigs": {},
                        "requestedToolConfirmations": {},
                    },
                    "nodeInfo": {"path": "weather@1"},
                    "id": "40664bc1-cd8f-4ca4-9d96-0f90901a20fa",
                    "timestamp": 1795425373.0006485,
                },
                {
                    "content": {"parts": [{"text": "hi"}], "role": "user"},
                    "invocationId": "e-f4ec8a3d-ea7a-4891-936a-f16bb9c8d047",
                    "author": "user",
                    "actions": {
                        "stateDelta": {},
                        "artifactDelta": {},
                        "requestedAuthConfigs": {},
                        "requestedToolConfirmations": {},
                    },
                    "nodeInfo": {"path": ""},
                    "id": "60280754-3807-4d5e-9ddb-c4b0d9693903",
                    "timestamp": 1795425373.0230134,
                },
                {
                    "content": {
                        "parts": [
                            {
                                "functionCall": {
                                    "id": "adk-3ec8ec7d-64e9-4dfa-a85f-96d749e8e3cc",
                                    "args": {"city": "Paris"},
                                    "name": "get_weather",
                                }
                            }
                        ],
                        "role": "model",
                    },
                    "invocationId": "e-f4ec8a3d-ea7a-4891-936a-f16bb9c8d047",
                    "author": "weather",
                    "actions": {
                        "stateDelta": {},
                        "artifactDelta": {},
                        "requestedAuthConfigs": {},
                        "requestedToolConfirmations": {},
                    },
                    "nodeInfo": {"path": "weather@1"},
                    "longRunningToolIds": [],
                    "id": "451086ed-1f6f-4ec8-91b8-1543e3dae3e9",
                    "timestamp": 1795425373.2540002,
                },
                {
                    "content": {
                        "parts": [
                            {
                                "functionResponse": {
                                    "id": "adk-3ec8ec7d-64e9-4dfa-a85f-96d749e8e3cc",
                                    "name": "get_weather",
                                    "response": {"weather": "sunny", "city": "Paris"},
                                }
                            }
                        ],
                        "role": "user",
                    },
                    "invocationId": "e-f4ec8a3d-ea7a-4891-936a-f16bb9c8d047",
                    "author": "weather",
                    "actions": {
                        "stateDelta": {"x": 1},
                        "artifactDelta": {},
                        "requestedAuthConfigs": {},
                        "requestedToolConfirmations": {},
                    },
                    "nodeInfo": {"path": "weather@1"},
                    "id": "60065b15-8857-476e-b6b3-a4e8cb1e1d08",
                    "timestamp": 1795425373.2559764,
                },
                {
                    "content": {"parts": [{"text": "It is sunny."}], "role": "model"},
                    "invocationId": "e-f4ec8a3d-ea7a-4891-936a-f16bb9c8d047",
                    "author": "weather",
                    "actions": {
                        "stateDelta": {},
                        "artifactDelta": {},
                        "requestedAuthConfigs": {},
                        "requestedToolConfirmations": {},
                    },
                    "nodeInfo": {"path": "weather@1"},
                    "id": "2e2a90d7-3075-4cad-8b8c-f55f7566f8f3",
                    "timestamp": 1795425373.259473,
                },
            ],
            "lastUpdateTime": 1795425373.259473,
        },
    },
    "run_missing": {"status": 404, "body": {"detail": "Session not found: nope"}},
    "run_sse_missing": {"status": 404, "body": {"detail": "Session not found: nope"}},
    "run_without_user": {
        "status": 422,
        "body": {
            "detail": [
                {
                    "type": "missing",
                    "loc": ["body", "userId"],
                    "msg": "Field required",
                    "input": {
                        "appName": "myapp",
                        "sessionId": "s1",
                        "newMessage": {"role": "user", "parts": [{"text": "hi"}]},
                    },
                }
            ]
        },
    },
    "artifact_save": {
        "status": 200,
        "body": {
            "version": 0,
            "canonicalUri": "memory://apps/myapp/users/u1/sessions/s1/artifacts/a.txt/versions/0",
            "customMetadata": {},
            "createTime": 1795425373.2839272,
            "mimeType": "text/plain",
        },
    },
    "artifact_list": {"status": 200, "body": ["a.txt"]},
    "artifact_load": {"status": 200, "body": {"text": "hello"}},
    "artifact_versions": {"status": 200, "body": [0]},
    "artifact_latest": {"status": 200, "body": {"text": "hello"}},
    "artifact_missing": {"status": 404, "body": {"detail": "Artifact not found"}},
    "artifact_delete": {"status": 200, "body": None},
    "artifact_list_after_delete": {"status": 200, "body": []},
    "delete": {"status": 200, "body": None},
    "get_deleted": {"status": 404, "body": {"detail": "Session not found"}},
    "create_without_body": {
        "status": 200,
        "body": {
            "id": "bd3ae718-34a0-4837-8c3d-10626ba24431",
            "appName": "myapp",
            "userId": "u1",
            "state": {"user:p": 2},
            "events": [],
            "lastUpdateTime": 1795425373.3176553,
        },
    },
}
