#!/bin/sh
echo nan >value.txt
